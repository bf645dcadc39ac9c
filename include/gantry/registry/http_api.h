// Read-only HTTP API of the registry, shaped after MLflow's model-registry
// REST endpoints (prefix /api/2.0/mlflow):
//   GET registered-models/get?name=N              {"registered_model": {...}}
//   GET registered-models/search?max_results=K    {"registered_models": [...]}
//   GET model-versions/get?name=N&version=V       {"model_version": {...}}
//   GET model-versions/search?name=N[&run_id=R]   {"model_versions": [...]}
//   GET registered-models/alias?name=N&alias=A    {"model_version": {...}}
// Errors are MLflow-shaped: {"error_code": "RESOURCE_DOES_NOT_EXIST" |
// "INVALID_PARAMETER_VALUE" | ..., "message": "..."} with 404/400/500.
// Writes (create, update, delete, alias set/delete) answer 403
// PERMISSION_DENIED: there is no authentication yet, so the server is deny
// by default for changes; change the registry with the CLI.
#pragma once

#include "gantry/core/http_server.h"
#include "gantry/registry/registry.h"

namespace gantry::registry {

// Adds the routes to `server` (before Start). `reg` must outlive the server.
void AddHttpRoutes(Registry& reg, http::Server& server);

}  // namespace gantry::registry
