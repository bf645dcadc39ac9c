#include "pyversion.h"

#include <algorithm>
#include <cctype>
#include <map>
#include <set>

#include "gantry/core/json.h"
#include "gantry/core/subprocess.h"
#include "gantry/core/text.h"

namespace gantry::jobs {
namespace {

// 'text', built by appending (GCC 12 warns falsely about "'" + std::string).
std::string Quoted(std::string_view text) {
  std::string q;
  q.reserve(text.size() + 2);
  q.push_back('\'');
  q.append(text);
  q.push_back('\'');
  return q;
}

bool IsSep(char c) { return c == '-' || c == '_' || c == '.'; }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsAlnum(char c) { return IsDigit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

// A cursor over lower-cased version text; every Take* leaves the position
// unchanged when it does not match, which gives the regex's backtracking.
class Scanner {
 public:
  explicit Scanner(std::string_view s) : s_(s) {}
  bool done() const { return pos_ == s_.size(); }
  char peek() const { return done() ? '\0' : s_[pos_]; }
  size_t pos() const { return pos_; }
  void reset(size_t p) { pos_ = p; }

  bool TakeChar(char c) {
    if (peek() != c) return false;
    ++pos_;
    return true;
  }
  bool TakeSep() {
    if (!IsSep(peek())) return false;
    ++pos_;
    return true;
  }
  bool TakeWord(std::string_view w) {
    if (s_.substr(pos_, w.size()) != w) return false;
    pos_ += w.size();
    return true;
  }
  // Digits into *n; false (position unchanged) when there are none.
  // *overflow is set for numbers beyond 64 bits.
  bool TakeNumber(uint64_t* n, bool* overflow) {
    size_t p = pos_;
    uint64_t v = 0;
    while (p < s_.size() && IsDigit(s_[p])) {
      uint64_t d = static_cast<uint64_t>(s_[p] - '0');
      if (v > (UINT64_MAX - d) / 10) *overflow = true;
      v = v * 10 + d;
      ++p;
    }
    if (p == pos_) return false;
    pos_ = p;
    *n = v;
    return true;
  }
  // [sep] number, or nothing (the implicit 0 of "1.0a" or "1.0.post").
  uint64_t TakeOptionalNumber(bool* overflow) {
    size_t start = pos_;
    TakeSep();
    uint64_t n = 0;
    if (!TakeNumber(&n, overflow)) reset(start);
    return n;
  }

 private:
  std::string_view s_;
  size_t pos_ = 0;
};

// Pre-release spellings, longest first so that "preview" is not read as
// "pre" followed by junk.
struct PreSpelling {
  std::string_view word;
  char kind;
};
constexpr PreSpelling kPreSpellings[] = {{"preview", 'r'}, {"alpha", 'a'}, {"beta", 'b'},
                                         {"pre", 'r'},     {"rc", 'r'},    {"a", 'a'},
                                         {"b", 'b'},       {"c", 'r'}};

bool ParsePre(Scanner* sc, PyVersion* v, bool* overflow) {
  size_t start = sc->pos();
  sc->TakeSep();
  for (const PreSpelling& p : kPreSpellings) {
    if (sc->TakeWord(p.word)) {
      v->pre_kind = p.kind;
      v->pre_number = sc->TakeOptionalNumber(overflow);
      return true;
    }
  }
  sc->reset(start);
  return false;
}

bool ParsePost(Scanner* sc, PyVersion* v, bool* overflow) {
  size_t start = sc->pos();
  uint64_t n = 0;
  // The implicit form "1.0-1" (a dash, then digits only).
  if (sc->TakeChar('-') && sc->TakeNumber(&n, overflow)) {
    v->post = n;
    return true;
  }
  sc->reset(start);
  sc->TakeSep();
  for (std::string_view w : {"post", "rev", "r"}) {
    if (sc->TakeWord(w)) {
      v->post = sc->TakeOptionalNumber(overflow);
      return true;
    }
  }
  sc->reset(start);
  return false;
}

bool ParseDev(Scanner* sc, PyVersion* v, bool* overflow) {
  size_t start = sc->pos();
  sc->TakeSep();
  if (sc->TakeWord("dev")) {
    v->dev = sc->TakeOptionalNumber(overflow);
    return true;
  }
  sc->reset(start);
  return false;
}

bool ParseLocal(std::string_view s, PyVersion* v) {
  std::string part;
  for (char c : s) {
    if (IsSep(c)) {
      if (part.empty()) return false;
      v->local.push_back(part);
      part.clear();
    } else if (IsAlnum(c)) {
      part += c;
    } else {
      return false;
    }
  }
  if (part.empty()) return false;
  v->local.push_back(part);
  return true;
}

bool AllDigits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsDigit);
}

// Local parts: numeric ones sort after alphanumeric ones, numbers by value,
// strings by bytes; a shorter label that is a prefix sorts first.
int CompareLocal(const std::vector<std::string>& a, const std::vector<std::string>& b) {
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    bool an = AllDigits(a[i]), bn = AllDigits(b[i]);
    if (an != bn) return an ? 1 : -1;
    if (an) {
      // Compare by value without overflow: strip leading zeros, then length, then text.
      std::string_view x = a[i], y = b[i];
      while (x.size() > 1 && x.front() == '0') x.remove_prefix(1);
      while (y.size() > 1 && y.front() == '0') y.remove_prefix(1);
      if (x.size() != y.size()) return x.size() < y.size() ? -1 : 1;
      if (int c = x.compare(y); c != 0) return c < 0 ? -1 : 1;
    } else if (int c = a[i].compare(b[i]); c != 0) {
      return c < 0 ? -1 : 1;
    }
  }
  if (a.size() == b.size()) return 0;
  return a.size() < b.size() ? -1 : 1;
}

template <typename T>
int Cmp(const T& a, const T& b) {
  return a < b ? -1 : (b < a ? 1 : 0);
}

// Where the pre-release part puts a version relative to its release: a dev
// release with no pre or post part comes before every pre-release of it
// (1.0.dev1 < 1.0a1), a final or post release after all of them.
int PreRank(const PyVersion& v) {
  if (v.pre_kind == 0) return (!v.post && v.dev) ? -1 : 3;
  return v.pre_kind == 'a' ? 0 : (v.pre_kind == 'b' ? 1 : 2);
}

int CompareRelease(const std::vector<uint64_t>& a, const std::vector<uint64_t>& b) {
  size_t n = std::max(a.size(), b.size());
  for (size_t i = 0; i < n; ++i) {
    uint64_t x = i < a.size() ? a[i] : 0, y = i < b.size() ? b[i] : 0;
    if (x != y) return x < y ? -1 : 1;
  }
  return 0;
}

// The release of `v` padded with zeros starts with `prefix` (and the epochs
// agree): the ==X.* match. Pre, post, dev and local parts do not matter.
bool PrefixMatch(const PyVersion& v, const PyVersion& prefix) {
  if (v.epoch != prefix.epoch) return false;
  for (size_t i = 0; i < prefix.release.size(); ++i) {
    uint64_t x = i < v.release.size() ? v.release[i] : 0;
    if (x != prefix.release[i]) return false;
  }
  return true;
}

bool HasOnlyRelease(const PyVersion& v) {
  return v.pre_kind == 0 && !v.post && !v.dev && v.local.empty();
}

}  // namespace

std::string PyVersion::ToString() const {
  std::string out;
  if (epoch != 0) out += std::to_string(epoch) + "!";
  for (size_t i = 0; i < release.size(); ++i) {
    if (i > 0) out += '.';
    out += std::to_string(release[i]);
  }
  if (pre_kind != 0) {
    out += pre_kind == 'r' ? "rc" : std::string(1, pre_kind);
    out += std::to_string(pre_number);
  }
  if (post) out += ".post" + std::to_string(*post);
  if (dev) out += ".dev" + std::to_string(*dev);
  if (!local.empty()) {
    out += '+';
    out += Join(local, ".");
  }
  return out;
}

PyVersion PyVersion::Base() const {
  PyVersion b;
  b.epoch = epoch;
  b.release = release;
  return b;
}

PyVersion PyVersion::Public() const {
  PyVersion p = *this;
  p.local.clear();
  return p;
}

Result<PyVersion> ParsePyVersion(std::string_view text) {
  const std::string lower = AsciiLower(TrimSpace(text));
  auto bad = [&](std::string_view why) {
    return InvalidArgument(Quoted(text) + " is not a PEP 440 version (" + std::string(why) + ")");
  };
  if (lower.empty()) return bad("empty");
  std::string_view s = lower;
  std::string_view local_text;
  if (size_t plus = s.find('+'); plus != std::string_view::npos) {
    local_text = s.substr(plus + 1);
    s = s.substr(0, plus);
  }
  PyVersion v;
  bool overflow = false;
  Scanner sc(s);
  sc.TakeChar('v');
  uint64_t n = 0;
  if (!sc.TakeNumber(&n, &overflow)) return bad("it does not start with a number");
  if (sc.TakeChar('!')) {
    v.epoch = n;
    if (!sc.TakeNumber(&n, &overflow)) return bad("no release number after the epoch");
  }
  v.release.push_back(n);
  while (true) {
    size_t p = sc.pos();
    if (!sc.TakeChar('.') || !sc.TakeNumber(&n, &overflow)) {
      sc.reset(p);
      break;
    }
    v.release.push_back(n);
  }
  ParsePre(&sc, &v, &overflow);
  ParsePost(&sc, &v, &overflow);
  ParseDev(&sc, &v, &overflow);
  if (!sc.done()) {
    return bad("unexpected '" + std::string(s.substr(sc.pos())) + "'");
  }
  if (lower.find('+') != std::string::npos && !ParseLocal(local_text, &v)) {
    return bad("malformed local label '+" + std::string(local_text) + "'");
  }
  if (overflow) return bad("a number does not fit in 64 bits");
  return v;
}

int ComparePyVersions(const PyVersion& a, const PyVersion& b) {
  if (int c = Cmp(a.epoch, b.epoch)) return c;
  if (int c = CompareRelease(a.release, b.release)) return c;
  if (int c = Cmp(PreRank(a), PreRank(b))) return c;
  if (a.pre_kind != 0) {
    if (int c = Cmp(a.pre_number, b.pre_number)) return c;
  }
  // No post release sorts before any post release.
  if (a.post.has_value() != b.post.has_value()) return a.post ? 1 : -1;
  if (a.post) {
    if (int c = Cmp(*a.post, *b.post)) return c;
  }
  // No dev release sorts after any dev release.
  if (a.dev.has_value() != b.dev.has_value()) return a.dev ? -1 : 1;
  if (a.dev) {
    if (int c = Cmp(*a.dev, *b.dev)) return c;
  }
  if (a.local.empty() != b.local.empty()) return a.local.empty() ? -1 : 1;
  return CompareLocal(a.local, b.local);
}

bool Specifier::Contains(const PyVersion& v) const {
  auto base_equal = [&] { return ComparePyVersions(v.Base(), version.Base()) == 0; };
  switch (op) {
    case SpecOp::kEqual:
    case SpecOp::kNotEqual: {
      bool eq;
      if (wildcard) {
        eq = PrefixMatch(v, version);
      } else if (!version.local.empty()) {
        eq = ComparePyVersions(v, version) == 0;
      } else {
        // A specifier without a local label matches every local build of it.
        eq = ComparePyVersions(v.Public(), version) == 0;
      }
      return op == SpecOp::kEqual ? eq : !eq;
    }
    case SpecOp::kLessEqual:
      return ComparePyVersions(v.Public(), version) <= 0;
    case SpecOp::kGreaterEqual:
      return ComparePyVersions(v.Public(), version) >= 0;
    case SpecOp::kLess:
      // "<3" means below the 3 series: 3.0rc1 and 3.0.dev1 are not admitted
      // unless the specifier itself is a pre-release.
      if (ComparePyVersions(v, version) >= 0) return false;
      return version.is_prerelease() || !v.is_prerelease() || !base_equal();
    case SpecOp::kGreater:
      // ">1.0" means past the 1.0 series: not 1.0.post1 (unless the
      // specifier is a post release) and not 1.0+local.
      if (ComparePyVersions(v, version) <= 0) return false;
      if (!version.is_postrelease() && v.is_postrelease() && base_equal()) return false;
      return v.local.empty() || !base_equal();
    case SpecOp::kCompatible: {
      if (ComparePyVersions(v.Public(), version) < 0) return false;
      PyVersion prefix = version.Base();
      prefix.release.pop_back();
      return PrefixMatch(v, prefix);
    }
    case SpecOp::kArbitrary:
      return EqualsIgnoreCase(v.ToString(), text);
  }
  return false;
}

std::string Specifier::ToString() const {
  static constexpr std::string_view kNames[] = {"==", "!=", "<", "<=", ">", ">=", "~=", "==="};
  return std::string(kNames[static_cast<int>(op)]) + text;
}

bool SpecifierSet::Contains(const PyVersion& v) const {
  return std::all_of(clauses.begin(), clauses.end(),
                     [&](const Specifier& s) { return s.Contains(v); });
}

bool SpecifierSet::ContainsText(std::string_view version_text) const {
  Result<PyVersion> v = ParsePyVersion(version_text);
  for (const Specifier& s : clauses) {
    if (s.op == SpecOp::kArbitrary) {
      if (!EqualsIgnoreCase(TrimSpace(version_text), s.text)) return false;
    } else if (!v.ok() || !s.Contains(*v)) {
      return false;
    }
  }
  return true;
}

std::string SpecifierSet::ToString() const {
  std::vector<std::string> parts;
  for (const Specifier& s : clauses) parts.push_back(s.ToString());
  return Join(parts, ",");
}

namespace {

Result<Specifier> ParseClause(std::string_view clause) {
  static constexpr std::pair<std::string_view, SpecOp> kOps[] = {
      {"===", SpecOp::kArbitrary}, {"~=", SpecOp::kCompatible}, {"==", SpecOp::kEqual},
      {"!=", SpecOp::kNotEqual},   {"<=", SpecOp::kLessEqual},  {">=", SpecOp::kGreaterEqual},
      {"<", SpecOp::kLess},        {">", SpecOp::kGreater}};
  const std::string quoted = Quoted(clause);
  Specifier s;
  bool found = false;
  for (const auto& [name, op] : kOps) {
    if (clause.substr(0, name.size()) == name) {
      s.op = op;
      clause.remove_prefix(name.size());
      found = true;
      break;
    }
  }
  if (!found) {
    return InvalidArgument(quoted +
                           ": a version specifier starts with ==, !=, <=, >=, <, >, ~= or ===");
  }
  std::string_view ver = TrimSpace(clause);
  if (ver.empty()) return InvalidArgument(quoted + ": no version after the operator");
  s.text = std::string(ver);
  if (s.op == SpecOp::kArbitrary) {
    if (ver.find_first_of(" \t") != std::string_view::npos) {
      return InvalidArgument(quoted + ": an === version has no spaces");
    }
    return s;
  }
  if (ver.size() >= 2 && ver.substr(ver.size() - 2) == ".*") {
    if (s.op != SpecOp::kEqual && s.op != SpecOp::kNotEqual) {
      return InvalidArgument(quoted + ": a '.*' wildcard goes only with == or !=");
    }
    s.wildcard = true;
    ver.remove_suffix(2);
  }
  Result<PyVersion> v = ParsePyVersion(ver);
  if (!v.ok()) return InvalidArgument(quoted + ": " + v.status().message());
  s.version = *v;
  if (s.wildcard && !HasOnlyRelease(s.version)) {
    return InvalidArgument(quoted + ": a '.*' wildcard follows release numbers only (==1.2.*)");
  }
  if (!s.version.local.empty() && s.op != SpecOp::kEqual && s.op != SpecOp::kNotEqual) {
    return InvalidArgument(quoted + ": a local version label (+...) goes only with == or !=");
  }
  if (s.op == SpecOp::kCompatible && s.version.release.size() < 2) {
    return InvalidArgument(quoted + ": ~= needs at least two release numbers (~=2.1, not ~=2)");
  }
  return s;
}

}  // namespace

Result<SpecifierSet> ParseSpecifierSet(std::string_view text) {
  SpecifierSet set;
  text = TrimSpace(text);
  if (text.empty()) return set;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string_view clause = TrimSpace(text.substr(start, comma - start));
    if (clause.empty()) {
      return InvalidArgument(Quoted(text) + ": an empty clause between commas");
    }
    ASSIGN_OR_RETURN(Specifier s, ParseClause(clause));
    set.clauses.push_back(std::move(s));
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return set;
}

bool IsValidPackageName(std::string_view name) {
  if (name.empty() || !IsAlnum(name.front()) || !IsAlnum(name.back())) return false;
  return std::all_of(name.begin(), name.end(), [](char c) { return IsAlnum(c) || IsSep(c); });
}

std::string NormalizePackageName(std::string_view name) {
  std::string out;
  bool in_sep = false;
  for (char c : name) {
    if (IsSep(c)) {
      if (!in_sep) out += '-';
      in_sep = true;
    } else {
      out += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      in_sep = false;
    }
  }
  return out;
}

Result<Requirement> ParseRequirement(std::string_view text) {
  const std::string quoted = Quoted(text);
  std::string_view s = TrimSpace(text);
  if (s.find(';') != std::string_view::npos) {
    return InvalidArgument(quoted + ": environment markers (;) are not supported here");
  }
  if (s.find('@') != std::string_view::npos) {
    return InvalidArgument(quoted + ": URL requirements (@) are not supported here");
  }
  size_t end = 0;
  while (end < s.size() && (IsAlnum(s[end]) || IsSep(s[end]))) ++end;
  Requirement r;
  r.name = std::string(s.substr(0, end));
  if (!IsValidPackageName(r.name)) {
    return InvalidArgument(quoted +
                           ": expected a package name (letters, digits, '.', '_', '-') first");
  }
  s = TrimSpace(s.substr(end));
  if (!s.empty() && s.front() == '[') {
    size_t close = s.find(']');
    if (close == std::string_view::npos) return InvalidArgument(quoted + ": unclosed '['");
    std::string_view list = s.substr(1, close - 1);
    size_t start = 0;
    while (true) {
      size_t comma = list.find(',', start);
      std::string extra(TrimSpace(list.substr(start, comma - start)));
      if (!IsValidPackageName(extra)) {
        return InvalidArgument(quoted + ": malformed extra '" + extra + "'");
      }
      r.extras.push_back(extra);
      if (comma == std::string_view::npos) break;
      start = comma + 1;
    }
    s = TrimSpace(s.substr(close + 1));
  }
  if (!s.empty() && s.front() == '(') {
    if (s.back() != ')') return InvalidArgument(quoted + ": unclosed '('");
    s = TrimSpace(s.substr(1, s.size() - 2));
  }
  Result<SpecifierSet> set = ParseSpecifierSet(s);
  if (!set.ok()) return InvalidArgument(quoted + ": " + set.status().message());
  r.specifiers = std::move(*set);
  return r;
}

// ---- The interpreter probe

namespace {

constexpr std::string_view kProbeMarker = "GANTRY-PREREQ-PROBE ";

// Runs inside the interpreter. Distributions are listed before any import so
// that what a module does to sys.path on import cannot change the list.
// Imports print to stderr (stdout is swapped) and the report goes last on
// its own marked line, so a chatty module cannot corrupt it.
constexpr std::string_view kProbeScript = R"PY(
import json, os, sys
real_stdout = sys.stdout
sys.stdout = sys.stderr
req = json.loads(sys.argv[1])
if req["path"] is not None:
    sys.path[:0] = req["path"]
if req["workdir"]:
    os.chdir(req["workdir"])
import importlib, importlib.metadata as md
out = {"executable": sys.executable, "python": "%d.%d.%d" % sys.version_info[:3],
       "modules": [], "distributions": []}
if req["distributions"]:
    for d in md.distributions():
        try:
            name = d.metadata["Name"]
        except Exception:
            name = None
        if not name:
            continue
        try:
            loc = str(d.locate_file(""))
        except Exception:
            loc = ""
        out["distributions"].append({"name": name, "version": d.version or "", "location": loc})
owners = {}
if req["modules"]:
    try:
        owners = md.packages_distributions()
    except Exception:
        pass
for name in req["modules"]:
    r = {"name": name, "found": False, "version": "", "source": "", "file": "", "error": ""}
    out["modules"].append(r)
    try:
        m = importlib.import_module(name)
    except BaseException as e:
        r["error"] = "%s: %s" % (type(e).__name__, e)
        continue
    r["found"] = True
    r["file"] = str(getattr(m, "__file__", "") or "")
    dists = list(dict.fromkeys(owners.get(name.split(".")[0], [])))
    for dn in (dists if len(dists) == 1 else []) + [name]:
        try:
            r["version"] = md.version(dn)
            r["source"] = "distribution " + dn
            break
        except Exception:
            pass
    if not r["version"]:
        v = getattr(m, "__version__", None)
        if isinstance(v, (str, int, float)):
            r["version"] = str(v)
            r["source"] = "__version__"
real_stdout.write("\n" + "GANTRY-PREREQ-PROBE " + json.dumps(out) + "\n")
real_stdout.flush()
)PY";

std::string JsonString(const Json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::string LastLine(std::string_view text) {
  text = TrimSpace(text);
  size_t nl = text.rfind('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

}  // namespace

Result<PythonProbe> ParsePythonProbeOutput(std::string_view stdout_text) {
  size_t at = stdout_text.rfind(kProbeMarker);
  if (at == std::string_view::npos) return DataLoss("the Python probe printed no report");
  std::string_view line = stdout_text.substr(at + kProbeMarker.size());
  line = line.substr(0, line.find('\n'));
  ASSIGN_OR_RETURN(Json j, ParseJson(line, "the Python probe's report"));
  if (!j.is_object() || !j.contains("modules") || !j["modules"].is_array() ||
      !j.contains("distributions") || !j["distributions"].is_array()) {
    return DataLoss("the Python probe's report lacks modules or distributions");
  }
  PythonProbe p;
  p.executable = JsonString(j, "executable");
  p.python_version = JsonString(j, "python");
  for (const Json& m : j["modules"]) {
    if (!m.is_object()) return DataLoss("the Python probe's report has a malformed module");
    ModuleProbe mp;
    mp.name = JsonString(m, "name");
    mp.found = m.value("found", false);
    mp.version = JsonString(m, "version");
    mp.version_source = JsonString(m, "source");
    mp.file = JsonString(m, "file");
    mp.error = JsonString(m, "error");
    p.modules.push_back(std::move(mp));
  }
  std::set<std::string> seen;
  for (const Json& d : j["distributions"]) {
    if (!d.is_object()) return DataLoss("the Python probe's report has a malformed distribution");
    InstalledDistribution dist{JsonString(d, "name"), JsonString(d, "version"),
                               JsonString(d, "location")};
    if (dist.name.empty() || !seen.insert(NormalizePackageName(dist.name)).second) continue;
    p.distributions.push_back(std::move(dist));
  }
  return p;
}

Result<PythonProbe> RunPythonProbe(const PythonProbeRequest& request) {
  Json req;
  req["path"] = request.path ? Json(*request.path) : Json(nullptr);
  req["workdir"] = request.workdir;
  req["modules"] = request.modules;
  req["distributions"] = request.distributions;
  std::vector<std::string> argv = {request.interpreter};
  // -I: no $PYTHON* variables, no user site-packages, no script directory;
  // -S: no site module, so no system site-packages either.
  if (request.path) argv.insert(argv.end(), {"-I", "-S"});
  argv.insert(argv.end(), {"-c", std::string(kProbeScript), req.dump()});
  Result<SubprocessResult> run = RunSubprocess(argv, request.timeout);
  if (!run.ok()) {
    return Unavailable("Python interpreter " + request.interpreter + ": " + run.status().message());
  }
  Result<PythonProbe> probe = ParsePythonProbeOutput(run->out);
  if (!probe.ok()) {
    std::string why = LastLine(run->err);
    return Unavailable("Python interpreter " + request.interpreter + " exited with code " +
                       std::to_string(run->exit_code) + " without a report" +
                       (why.empty() ? std::string() : ": " + why) +
                       " (Python 3.8 or later is needed)");
  }
  if (probe->modules.size() != request.modules.size()) {
    return DataLoss("the Python probe reported " + std::to_string(probe->modules.size()) +
                    " modules for " + std::to_string(request.modules.size()) + " asked");
  }
  return probe;
}

std::vector<std::string> AllowlistViolations(const std::vector<Requirement>& allowlist,
                                             const std::vector<InstalledDistribution>& installed) {
  std::map<std::string, const Requirement*> allowed;
  for (const Requirement& r : allowlist) allowed.emplace(NormalizePackageName(r.name), &r);
  std::vector<std::string> out;
  for (const InstalledDistribution& d : installed) {
    const std::string label = d.name + " " + (d.version.empty() ? "(no version)" : d.version);
    auto it = allowed.find(NormalizePackageName(d.name));
    if (it == allowed.end()) {
      out.push_back(label + ": not in the allowlist");
      continue;
    }
    const Requirement& r = *it->second;
    if (r.specifiers.empty() || r.specifiers.ContainsText(d.version)) continue;
    std::string why = "does not satisfy " + r.name + r.specifiers.ToString();
    if (!ParsePyVersion(d.version).ok()) why += " (not a PEP 440 version)";
    out.push_back(label + ": " + why);
  }
  return out;
}

}  // namespace gantry::jobs
