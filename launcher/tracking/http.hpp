// HTTP for the tracking client (launcher/tracking/mlflow): libcurl (Debian's libcurl4-openssl-dev,
// a well-kept client: TLS, proxies from the environment, redirects) behind three calls. Every
// request ends by a deadline: a connect timeout of its own and the caller's overall time left,
// so a tracking server that is down or unreachable from a compute node costs seconds, never a
// hang. Credentials come from MLflow's own environment variables (MLFLOW_TRACKING_TOKEN as a
// bearer token, else MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD as basic
// authentication), never from the spec; MLFLOW_TRACKING_INSECURE_TLS=true skips the certificate
// check, as MLflow's Python client does.
// Thread safety: an Http is used by one thread at a time.
#pragma once

#include <chrono>
#include <memory>
#include <stdexcept>
#include <string>

#include "common/time.hpp"

namespace hpctrain::tracking {

// The request got no answer: no connection, a timeout, a TLS failure. The message names the URL
// and says why (curl's words).
class HttpUnreachable : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

struct HttpResponse {
  long status = 0;  // the HTTP status
  std::string body;
};

class Http {
 public:
  // `base`: the server's URL (http://host:5000 or with a path prefix), without a trailing slash
  // needed; each request's path is appended. No request runs past `deadline`.
  Http(std::string base, Clock::time_point deadline);
  ~Http();
  Http(const Http&) = delete;
  Http& operator=(const Http&) = delete;

  HttpResponse get(const std::string& path);
  HttpResponse post_json(const std::string& path, const std::string& json);
  HttpResponse put(const std::string& path, const std::string& body,
                   const std::string& content_type);

  // `text` percent-encoded for a URL's query or path segment (RFC 3986 unreserved kept).
  static std::string escape(const std::string& text);
  const std::string& base() const { return base_; }

 private:
  HttpResponse request(const char* method, const std::string& path, const std::string* body,
                       const std::string& content_type);
  std::string base_;
  Clock::time_point deadline_;
  struct Curl;
  std::unique_ptr<Curl> curl_;
};

// How long to wait for a connection to the server, at most.
inline constexpr std::chrono::seconds kConnectTimeout{5};

}  // namespace hpctrain::tracking
