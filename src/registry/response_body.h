// Test helper: a handler may answer with a file (ServerResponse::body_file,
// sent by the server with sendfile). Tests that call handlers directly, or
// rewrite their answers, read that file into `body` first.
#pragma once

#include <unistd.h>

#include "gantry/core/http_server.h"
#include "gantry/core/json.h"

namespace gantry::registry {

inline void LoadBodyFile(http::ServerResponse* resp) {
  if (resp->body_file.empty()) return;
  Result<std::string> data = ReadFile(resp->body_file);
  resp->body = data.ok() ? std::move(*data) : std::string();
  if (resp->body_file_temporary) ::unlink(resp->body_file.c_str());
  resp->body_file.clear();
  resp->body_file_temporary = false;
}

}  // namespace gantry::registry
