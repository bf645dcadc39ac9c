// Private to src/jobs: what the runner needs to decide whether a step is up to
// date, and to fill in a step's command line.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "gantry/core/status.h"
#include "gantry/jobs/workflow.h"

namespace gantry::jobs {

// Files matching `patterns` (paths or globs relative to `workdir`), sorted. A
// pattern without glob characters that names nothing yields nothing.
std::vector<std::string> ExpandPatterns(const std::string& workdir,
                                        const std::vector<std::string>& patterns);

// SHA-256 hex of what decides a step's result besides its input files: the
// command, workdir, the step's own environment, the image, the declared
// inputs and outputs, and the sweep block.
std::string Fingerprint(const Step& step);

// Why the step must run, or nullopt when it is up to date: it declares
// outputs, each output pattern matches a file, the oldest output is not older
// than the newest input, and `previous_fingerprint` (of its last success)
// equals `fingerprint`.
std::optional<std::string> WhyRun(const Step& step, const std::string& fingerprint,
                                  const std::string& previous_fingerprint);

// Replaces ${{name}} in `text` by vars.at(name). InvalidArgument naming the
// unknown variable and `where` (a step's position) otherwise.
Result<std::string> Substitute(std::string_view text,
                               const std::map<std::string, std::string>& vars,
                               std::string_view where);

}  // namespace gantry::jobs
