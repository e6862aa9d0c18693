// Debian's libxnnpack-dev and libpthreadpool-dev (installed by scripts/setup.sh). No shims are
// needed: every XNNPACK entry point Spotter uses imports into Swift as it is.
#include <pthreadpool.h>
#include <xnnpack.h>
