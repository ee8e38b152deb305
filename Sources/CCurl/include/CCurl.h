#ifndef CCURL_H
#define CCURL_H
/* Typed, non-variadic wrappers for the libcurl calls Swift cannot make. */
#include <curl/curl.h>

typedef size_t (*ccurl_data_cb)(char *data, size_t size, size_t nmemb, void *userdata);

CURLcode ccurl_setopt_long(CURL *h, CURLoption opt, long value);
CURLcode ccurl_setopt_off(CURL *h, CURLoption opt, curl_off_t value);
CURLcode ccurl_setopt_string(CURL *h, CURLoption opt, const char *value);
CURLcode ccurl_setopt_pointer(CURL *h, CURLoption opt, void *value);
/** CURLOPT_WRITEFUNCTION or CURLOPT_HEADERFUNCTION. */
CURLcode ccurl_setopt_callback(CURL *h, CURLoption opt, ccurl_data_cb cb);

CURLcode ccurl_getinfo_long(CURL *h, CURLINFO info, long *out);
CURLcode ccurl_getinfo_off(CURL *h, CURLINFO info, curl_off_t *out);
CURLcode ccurl_getinfo_pointer(CURL *h, CURLINFO info, void **out);

CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption opt, long value);

/** The easy handle and result of a CURLMSG_DONE message, or 0 if msg is not one. */
int ccurl_msg_done(CURLMsg *msg, CURL **easy, CURLcode *result);

#endif
