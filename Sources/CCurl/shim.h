// Debian's libcurl (libcurl4-openssl-dev).
#include <curl/curl.h>

// curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot call; these typed
// wrappers are the only ways Spotter calls them.
typedef size_t (*spotter_curl_data_callback)(char *data, size_t size, size_t count, void *context);
typedef int (*spotter_curl_progress_callback)(void *context, curl_off_t total, curl_off_t received,
                                              curl_off_t upload_total, curl_off_t uploaded);

static inline CURLcode spotter_curl_set_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode spotter_curl_set_string(CURL *handle, CURLoption option, const char *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode spotter_curl_set_pointer(CURL *handle, CURLoption option, void *value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode spotter_curl_set_data_callback(CURL *handle, CURLoption option, spotter_curl_data_callback value) {
    return curl_easy_setopt(handle, option, value);
}
static inline CURLcode spotter_curl_set_progress_callback(CURL *handle, spotter_curl_progress_callback value) {
    return curl_easy_setopt(handle, CURLOPT_XFERINFOFUNCTION, value);
}
static inline CURLcode spotter_curl_get_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}
static inline CURLcode spotter_curl_get_string(CURL *handle, CURLINFO info, char **value) {
    return curl_easy_getinfo(handle, info, value);
}
