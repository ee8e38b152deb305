#include "CCurl.h"

CURLcode ccurl_setopt_long(CURL *h, CURLoption opt, long value) { return curl_easy_setopt(h, opt, value); }
CURLcode ccurl_setopt_off(CURL *h, CURLoption opt, curl_off_t value) { return curl_easy_setopt(h, opt, value); }
CURLcode ccurl_setopt_string(CURL *h, CURLoption opt, const char *value) { return curl_easy_setopt(h, opt, value); }
CURLcode ccurl_setopt_pointer(CURL *h, CURLoption opt, void *value) { return curl_easy_setopt(h, opt, value); }
CURLcode ccurl_setopt_callback(CURL *h, CURLoption opt, ccurl_data_cb cb) { return curl_easy_setopt(h, opt, cb); }

CURLcode ccurl_getinfo_long(CURL *h, CURLINFO info, long *out) { return curl_easy_getinfo(h, info, out); }
CURLcode ccurl_getinfo_off(CURL *h, CURLINFO info, curl_off_t *out) { return curl_easy_getinfo(h, info, out); }
CURLcode ccurl_getinfo_pointer(CURL *h, CURLINFO info, void **out) { return curl_easy_getinfo(h, info, out); }

CURLMcode ccurl_multi_setopt_long(CURLM *m, CURLMoption opt, long value) { return curl_multi_setopt(m, opt, value); }

int ccurl_msg_done(CURLMsg *msg, CURL **easy, CURLcode *result) {
    if (msg == NULL || msg->msg != CURLMSG_DONE) return 0;
    *easy = msg->easy_handle;
    *result = msg->data.result;
    return 1;
}
