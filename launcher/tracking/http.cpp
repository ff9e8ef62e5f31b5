#include "tracking/http.hpp"

#include <curl/curl.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <cstring>
#include <mutex>

namespace hpctrain::tracking {
namespace {

std::string env(const char* name) {
  const char* v = std::getenv(name);
  return v ? v : "";
}

size_t append_body(char* data, size_t size, size_t count, void* out) {
  static_cast<std::string*>(out)->append(data, size * count);
  return size * count;
}

// curl_global_init is not thread-safe: once per process, before the first handle.
void init_curl() {
  static std::once_flag once;
  std::call_once(once, [] { curl_global_init(CURL_GLOBAL_DEFAULT); });
}

// The slist of headers, freed with the request.
struct Headers {
  curl_slist* list = nullptr;
  ~Headers() { curl_slist_free_all(list); }
  void add(const std::string& h) { list = curl_slist_append(list, h.c_str()); }
};

}  // namespace

struct Http::Curl {
  CURL* handle = nullptr;
  ~Curl() {
    if (handle) curl_easy_cleanup(handle);
  }
};

Http::Http(std::string base, Clock::time_point deadline)
    : base_(std::move(base)), deadline_(deadline), curl_(std::make_unique<Curl>()) {
  while (!base_.empty() && base_.back() == '/') base_.pop_back();
  init_curl();
  curl_->handle = curl_easy_init();
  if (!curl_->handle) throw HttpUnreachable(base_ + ": cannot start libcurl");
}

Http::~Http() = default;

std::string Http::escape(const std::string& text) {
  static const char* kHex = "0123456789ABCDEF";
  std::string out;
  for (const unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

HttpResponse Http::get(const std::string& path) { return request("GET", path, nullptr, ""); }

HttpResponse Http::post_json(const std::string& path, const std::string& json) {
  return request("POST", path, &json, "application/json");
}

HttpResponse Http::put(const std::string& path, const std::string& body,
                       const std::string& content_type) {
  return request("PUT", path, &body, content_type);
}

HttpResponse Http::request(const char* method, const std::string& path, const std::string* body,
                           const std::string& content_type) {
  const std::string url = base_ + path;
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline_ - Clock::now()).count();
  if (left <= 0) throw HttpUnreachable(url + ": no time left for the request");
  CURL* c = curl_->handle;
  curl_easy_reset(c);
  HttpResponse response;
  Headers headers;
  char error[CURL_ERROR_SIZE] = {0};
  curl_easy_setopt(c, CURLOPT_URL, url.c_str());
  curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, method);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);  // no SIGALRM for DNS timeouts: the caller's signals
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS,
                   static_cast<long>(std::min<long long>(
                       left, std::chrono::milliseconds(kConnectTimeout).count())));
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, static_cast<long>(left));
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, append_body);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &response.body);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, error);
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_USERAGENT, "hpctrain");
  if (body) {
    curl_easy_setopt(c, CURLOPT_POSTFIELDS, body->data());
    curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, static_cast<curl_off_t>(body->size()));
    headers.add("Content-Type: " + content_type);
  }
  const std::string token = env("MLFLOW_TRACKING_TOKEN");
  const std::string user = env("MLFLOW_TRACKING_USERNAME");
  const std::string password = env("MLFLOW_TRACKING_PASSWORD");
  if (!token.empty()) {
    headers.add("Authorization: Bearer " + token);
  } else if (!user.empty()) {
    curl_easy_setopt(c, CURLOPT_HTTPAUTH, CURLAUTH_BASIC);
    curl_easy_setopt(c, CURLOPT_USERNAME, user.c_str());
    curl_easy_setopt(c, CURLOPT_PASSWORD, password.c_str());
  }
  if (env("MLFLOW_TRACKING_INSECURE_TLS") == "true") {
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
    curl_easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
  }
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, headers.list);
  const CURLcode rc = curl_easy_perform(c);
  if (rc != CURLE_OK) {
    throw HttpUnreachable(std::string(method) + " " + url + ": " +
                          (error[0] ? error : curl_easy_strerror(rc)));
  }
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &response.status);
  return response;
}

}  // namespace hpctrain::tracking
