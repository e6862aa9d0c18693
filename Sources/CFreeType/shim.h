// Debian's libfreetype-dev (headers under /usr/include/freetype2, found through pkg-config).
#include <ft2build.h>
#include FT_FREETYPE_H
