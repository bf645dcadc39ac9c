// Readers for `gantry drift`: CSV (RFC 4180) and JSON Lines into a columnar
// Table, multithreaded over row blocks.
//
// CSV: a quoted field may hold newlines, so a block boundary cannot be found
// by looking for '\n' alone. One fast serial pass finds the record boundaries
// (tracking only the quote state), then threads parse the fields of their
// block of records. JSON Lines has no such problem: blocks split at '\n'.
// Each block keeps its own category dictionary; they are merged in block
// order, so codes (order of first appearance) are identical to a serial read.
#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <deque>
#include <limits>
#include <optional>
#include <thread>
#include <unordered_map>

#include "gantry/core/json.h"
#include "gantry/core/text.h"
#include "gantry/drift/drift.h"

namespace gantry::drift {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
// Below this many records a block is not worth a thread.
constexpr size_t kMinRecordsPerBlock = 16384;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r'))
    s.remove_suffix(1);
  return s;
}

bool IsNullToken(std::string_view s) {
  return s.empty() || s == "NA" || s == "null" || s == "NULL" || s == "N/A";
}

// Parses a whole trimmed cell as a double; "nan" parses (and becomes a null).
bool ParseDouble(std::string_view s, double* out) {
  if (!s.empty() && s.front() == '+') s.remove_prefix(1);
  const char* end = s.data() + s.size();
  auto [p, ec] = std::from_chars(s.data(), end, *out);
  return ec == std::errc() && p == end;
}

// " (did you mean 'x'?)" for a misspelt header, or "".
std::string Suggest(std::string_view word, const std::vector<ColumnSpec>& cols) {
  std::vector<std::string> names;
  for (const ColumnSpec& c : cols) names.push_back(c.name);
  std::optional<std::string> best = ClosestMatch(word, names, std::max<size_t>(2, word.size() / 3));
  return best ? fmt::format(" (did you mean '{}'?)", *best) : "";
}

// Per-block, per-column accumulation.
struct ColumnBlock {
  std::vector<double> numbers;
  std::vector<int32_t> codes;
  std::vector<std::string> dictionary;
  std::unordered_map<std::string, int32_t> index;
  uint64_t nulls = 0, type_errors = 0;

  void AddText(ColumnKind kind, std::string_view raw) {
    std::string_view s = Trim(raw);
    if (kind == ColumnKind::kNumerical) {
      double v;
      if (IsNullToken(s)) {
        numbers.push_back(kNaN);
        ++nulls;
      } else if (ParseDouble(s, &v)) {
        if (std::isnan(v)) ++nulls;
        numbers.push_back(v);
      } else {
        numbers.push_back(kNaN);
        ++nulls;
        ++type_errors;
      }
    } else {
      if (IsNullToken(s)) {
        codes.push_back(-1);
        ++nulls;
        return;
      }
      AddCategory(std::string(s));
    }
  }
  void AddCategory(std::string s) {
    auto [it, inserted] = index.emplace(std::move(s), static_cast<int32_t>(dictionary.size()));
    if (inserted) dictionary.push_back(it->first);
    codes.push_back(it->second);
  }
  void AddNull(ColumnKind kind) {
    if (kind == ColumnKind::kNumerical)
      numbers.push_back(kNaN);
    else
      codes.push_back(-1);
    ++nulls;
  }
  void AddTypeError(ColumnKind kind) {
    AddNull(kind);
    ++type_errors;
  }
  void AddJson(ColumnKind kind, const Json& v) {
    if (v.is_null()) return AddNull(kind);
    if (kind == ColumnKind::kNumerical) {
      if (v.is_number()) {
        double d = v.get<double>();
        if (std::isnan(d)) ++nulls;
        numbers.push_back(d);
      } else if (v.is_string()) {
        AddText(kind, v.get_ref<const std::string&>());  // "3.5" in quotes is still a number
      } else {
        AddTypeError(kind);  // bool, object, array
      }
      return;
    }
    if (v.is_string()) {
      std::string_view s = v.get_ref<const std::string&>();
      if (IsNullToken(Trim(s))) return AddNull(kind);
      AddCategory(std::string(Trim(s)));
    } else if (v.is_number_integer() || v.is_number_unsigned() || v.is_boolean()) {
      AddCategory(v.dump());  // 1 and "1" are the same category, as in a CSV
    } else if (v.is_number_float()) {
      double d = v.get<double>();
      if (d == std::floor(d) && std::fabs(d) < 1e15)
        AddCategory(fmt::format("{}", static_cast<int64_t>(d)));
      else
        AddCategory(v.dump());
    } else {
      AddTypeError(kind);
    }
  }
};

struct BlockError {
  uint64_t line = std::numeric_limits<uint64_t>::max();
  std::string message;
  void Set(uint64_t l, std::string m) {
    if (l < line) line = l, message = std::move(m);
  }
};

// Which table column (or -1 = skip) each input field maps to.
struct Layout {
  std::vector<ColumnSpec> specs;  // table columns (schema order, no ignored columns)
  std::vector<int> field_to_column;
};

int Threads(size_t records) {
  unsigned hw = std::max(1u, std::thread::hardware_concurrency());
  size_t by_size = std::max<size_t>(1, records / kMinRecordsPerBlock);
  return static_cast<int>(std::min<size_t>(hw, by_size));
}

// Runs fn(block) for blocks 0..n-1 on n threads (inline when n == 1).
template <typename Fn>
void ParallelFor(int n, Fn fn) {
  if (n <= 1) {
    fn(0);
    return;
  }
  std::vector<std::thread> threads;
  for (int b = 0; b < n; ++b) threads.emplace_back(fn, b);
  for (auto& t : threads) t.join();
}

// Concatenates blocks in order; categorical codes are remapped into one
// dictionary ordered by first appearance.
Table Merge(const Layout& layout, std::vector<std::vector<ColumnBlock>>& blocks, uint64_t rows) {
  Table t;
  t.rows = rows;
  for (size_t c = 0; c < layout.specs.size(); ++c) {
    Column col;
    col.spec = layout.specs[c];
    std::unordered_map<std::string, int32_t> index;
    for (auto& block : blocks) {
      ColumnBlock& cb = block[c];
      col.nulls += cb.nulls;
      col.type_errors += cb.type_errors;
      if (col.spec.kind == ColumnKind::kNumerical) {
        if (col.numbers.empty())
          col.numbers = std::move(cb.numbers);
        else
          col.numbers.insert(col.numbers.end(), cb.numbers.begin(), cb.numbers.end());
      } else {
        std::vector<int32_t> remap(cb.dictionary.size());
        for (size_t i = 0; i < cb.dictionary.size(); ++i) {
          auto [it, inserted] =
              index.emplace(cb.dictionary[i], static_cast<int32_t>(col.dictionary.size()));
          if (inserted) col.dictionary.push_back(cb.dictionary[i]);
          remap[i] = it->second;
        }
        col.codes.reserve(col.codes.size() + cb.codes.size());
        for (int32_t code : cb.codes) col.codes.push_back(code < 0 ? -1 : remap[code]);
      }
      cb = ColumnBlock{};  // free as we go
    }
    t.columns.push_back(std::move(col));
  }
  return t;
}

// Maps the header names (CSV) or checks keys against the schema.
Result<Layout> MakeLayout(const Schema& schema, const std::vector<std::string>& header,
                          std::string_view origin) {
  Layout layout;
  // A target column may be absent: live inputs get their labels later, if
  // ever, and a window without them is still compared (no model quality).
  auto absent_target = [&](const ColumnSpec& c) {
    return c.role == Role::kTarget &&
           std::find(header.begin(), header.end(), c.name) == header.end();
  };
  std::vector<int> schema_to_column(schema.columns().size(), -1);
  for (size_t i = 0; i < schema.columns().size(); ++i) {
    if (schema.columns()[i].role == Role::kIgnore || absent_target(schema.columns()[i])) continue;
    schema_to_column[i] = static_cast<int>(layout.specs.size());
    layout.specs.push_back(schema.columns()[i]);
  }
  std::vector<bool> seen(schema.columns().size(), false);
  for (size_t f = 0; f < header.size(); ++f) {
    const std::string& name = header[f];
    int col = -1;
    bool known = false;
    for (size_t i = 0; i < schema.columns().size(); ++i) {
      if (schema.columns()[i].name == name) {
        if (seen[i]) {
          return InvalidArgument(
              fmt::format("{}:1: column '{}' appears twice in the header; "
                          "rename one of them",
                          origin, name));
        }
        seen[i] = true;
        known = true;
        col = schema_to_column[i];
      }
    }
    if (!known && !schema.ignore_extra_columns()) {
      return InvalidArgument(fmt::format(
          "{}:1: column '{}' is not in the schema{}; add it to the schema (role: ignore to skip "
          "it) or set extra_columns: ignore",
          origin, name, Suggest(name, schema.columns())));
    }
    layout.field_to_column.push_back(col);
  }
  for (size_t i = 0; i < schema.columns().size(); ++i) {
    if (!seen[i] && schema.columns()[i].role != Role::kIgnore &&
        !absent_target(schema.columns()[i])) {
      return InvalidArgument(fmt::format(
          "{}:1: the header has no column '{}' named in the schema; add the column or remove it "
          "from the schema",
          origin, schema.columns()[i].name));
    }
  }
  return layout;
}

// ------------------------------------------------------------------ CSV --

struct Record {
  size_t begin, end;  // [begin, end) without the line terminator
  uint64_t line;      // 1-based line where the record starts
};

Result<std::vector<Record>> ScanRecords(std::string_view text, std::string_view origin) {
  std::vector<Record> records;
  records.reserve(text.size() / 64 + 1);
  size_t begin = 0;
  uint64_t line = 1, record_line = 1;
  bool quoted = false;
  const char* p = text.data();
  const size_t n = text.size();
  for (size_t i = 0; i < n; ++i) {
    char c = p[i];
    if (c == '"') {
      quoted = !quoted;  // "" inside quotes toggles twice: no net change
    } else if (c == '\n') {
      if (!quoted) {
        size_t end = (i > begin && p[i - 1] == '\r') ? i - 1 : i;
        if (end > begin) records.push_back({begin, end, record_line});  // blank lines skipped
        begin = i + 1;
        record_line = line + 1;
      }
      ++line;
    }
  }
  if (quoted) {
    return InvalidArgument(
        fmt::format("{}:{}: a quoted field is never closed (missing '\"'); "
                    "check the quotes of this record",
                    origin, record_line));
  }
  size_t end = n;
  if (end > begin && p[end - 1] == '\r') --end;
  if (end > begin) records.push_back({begin, end, record_line});
  return records;
}

// Splits one record into fields; `scratch` holds unescaped quoted fields. A
// deque, because `fields` points into its strings while more are added: a
// vector would move them (and short strings keep their bytes inline).
Status SplitFields(std::string_view rec, uint64_t line, std::string_view origin,
                   std::vector<std::string_view>* fields, std::deque<std::string>* scratch) {
  fields->clear();
  size_t used = 0;
  size_t i = 0;
  while (true) {
    if (i < rec.size() && rec[i] == '"') {
      if (used == scratch->size()) scratch->emplace_back();
      std::string& s = (*scratch)[used++];
      s.clear();
      ++i;
      while (true) {
        if (i >= rec.size()) {
          return InvalidArgument(
              fmt::format("{}:{}: a quoted field is never closed", origin, line));
        }
        size_t q = rec.find('"', i);
        if (q == std::string_view::npos) {
          return InvalidArgument(
              fmt::format("{}:{}: a quoted field is never closed", origin, line));
        }
        s.append(rec.substr(i, q - i));
        if (q + 1 < rec.size() && rec[q + 1] == '"') {
          s.push_back('"');
          i = q + 2;
        } else {
          i = q + 1;
          break;
        }
      }
      while (i < rec.size() && (rec[i] == ' ' || rec[i] == '\t')) ++i;
      if (i < rec.size() && rec[i] != ',') {
        return InvalidArgument(fmt::format(
            "{}:{}: field {}: characters after a closing quote; quote the whole field and double "
            "embedded quotes (\"\")",
            origin, line, fields->size() + 1));
      }
      fields->push_back(s);
    } else {
      size_t comma = rec.find(',', i);
      if (comma == std::string_view::npos) comma = rec.size();
      fields->push_back(rec.substr(i, comma - i));
      i = comma;
    }
    if (i >= rec.size()) break;
    ++i;                    // the comma
    if (i == rec.size()) {  // a trailing comma: one more empty field
      fields->push_back(std::string_view());
      break;
    }
  }
  return Status::Ok();
}

Result<Table> ReadCsv(std::string_view text, const Schema& schema, std::string_view origin) {
  ASSIGN_OR_RETURN(std::vector<Record> records, ScanRecords(text, origin));
  if (records.empty()) {
    return InvalidArgument(fmt::format(
        "{}: empty file: no header row; a CSV needs a header naming the columns", origin));
  }
  std::vector<std::string_view> fields;
  std::deque<std::string> scratch;
  RETURN_IF_ERROR(SplitFields(text.substr(records[0].begin, records[0].end - records[0].begin), 1,
                              origin, &fields, &scratch));
  std::vector<std::string> header;
  for (std::string_view f : fields) header.emplace_back(Trim(f));
  ASSIGN_OR_RETURN(Layout layout, MakeLayout(schema, header, origin));

  const size_t rows = records.size() - 1;
  const int n = Threads(rows);
  std::vector<std::vector<ColumnBlock>> blocks(n, std::vector<ColumnBlock>(layout.specs.size()));
  std::vector<BlockError> errors(n);
  ParallelFor(n, [&](int b) {
    size_t lo = 1 + rows * b / n, hi = 1 + rows * (b + 1) / n;
    std::vector<ColumnBlock>& out = blocks[b];
    for (size_t c = 0; c < out.size(); ++c) {
      if (layout.specs[c].kind == ColumnKind::kNumerical)
        out[c].numbers.reserve(hi - lo);
      else
        out[c].codes.reserve(hi - lo);
    }
    std::vector<std::string_view> f;
    std::deque<std::string> sc;
    for (size_t r = lo; r < hi; ++r) {
      const Record& rec = records[r];
      Status s =
          SplitFields(text.substr(rec.begin, rec.end - rec.begin), rec.line, origin, &f, &sc);
      if (!s.ok()) {
        errors[b].Set(rec.line, s.message());
        return;
      }
      if (f.size() != header.size()) {
        errors[b].Set(rec.line,
                      fmt::format("{}:{}: {} fields, the header has {}; every row needs one value "
                                  "per column (quote values that contain commas)",
                                  origin, rec.line, f.size(), header.size()));
        return;
      }
      for (size_t i = 0; i < f.size(); ++i) {
        int c = layout.field_to_column[i];
        if (c >= 0) out[c].AddText(layout.specs[c].kind, f[i]);
      }
    }
  });
  BlockError first;
  for (BlockError& e : errors) first.Set(e.line, std::move(e.message));
  if (!first.message.empty()) return InvalidArgument(first.message);
  return Merge(layout, blocks, rows);
}

// -------------------------------------------------------------- JSONL --

Result<Table> ReadJsonl(std::string_view text, const Schema& schema, std::string_view origin) {
  // Line starts, found serially (cheap: memchr speed).
  struct Line {
    size_t begin, end;
    uint64_t number;
  };
  std::vector<Line> lines;
  uint64_t number = 1;
  size_t begin = 0;
  while (begin <= text.size()) {
    size_t nl = text.find('\n', begin);
    size_t end = nl == std::string_view::npos ? text.size() : nl;
    std::string_view l = Trim(text.substr(begin, end - begin));
    if (!l.empty()) lines.push_back({begin, end, number});
    if (nl == std::string_view::npos) break;
    begin = nl + 1;
    ++number;
  }
  // No header in JSON Lines: every schema column is expected (missing keys
  // are nulls); keys not in the schema are checked per line below.
  std::vector<std::string> header;
  for (const ColumnSpec& c : schema.columns()) header.push_back(c.name);
  ASSIGN_OR_RETURN(Layout layout, MakeLayout(schema, header, origin));
  std::unordered_map<std::string, int> key_to_column;  // -1 = ignored column
  for (size_t i = 0; i < header.size(); ++i) key_to_column[header[i]] = layout.field_to_column[i];

  const size_t rows = lines.size();
  const int n = Threads(rows);
  std::vector<std::vector<ColumnBlock>> blocks(n, std::vector<ColumnBlock>(layout.specs.size()));
  std::vector<BlockError> errors(n);
  ParallelFor(n, [&](int b) {
    size_t lo = rows * b / n, hi = rows * (b + 1) / n;
    std::vector<ColumnBlock>& out = blocks[b];
    std::vector<bool> got(layout.specs.size());
    for (size_t r = lo; r < hi; ++r) {
      const Line& ln = lines[r];
      Json obj = Json::parse(text.begin() + ln.begin, text.begin() + ln.end, nullptr, false);
      if (obj.is_discarded() || !obj.is_object()) {
        errors[b].Set(ln.number, fmt::format("{}:{}: not a JSON object; JSON Lines needs one "
                                             "object per line, e.g. {{\"age\": 31}}",
                                             origin, ln.number));
        return;
      }
      std::fill(got.begin(), got.end(), false);
      for (auto it = obj.begin(); it != obj.end(); ++it) {
        auto k = key_to_column.find(it.key());
        if (k == key_to_column.end()) {
          if (schema.ignore_extra_columns()) continue;
          errors[b].Set(
              ln.number,
              fmt::format("{}:{}: key '{}' is not in the schema{}; add it to the schema "
                          "(role: ignore to skip it) or set extra_columns: ignore",
                          origin, ln.number, it.key(), Suggest(it.key(), schema.columns())));
          return;
        }
        int c = k->second;
        if (c < 0) continue;
        if (got[c]) continue;  // nlohmann keeps the last duplicate; one value per row
        got[c] = true;
        out[c].AddJson(layout.specs[c].kind, it.value());
      }
      for (size_t c = 0; c < got.size(); ++c) {
        if (!got[c]) out[c].AddNull(layout.specs[c].kind);  // a missing key is a null
      }
    }
  });
  BlockError first;
  for (BlockError& e : errors) first.Set(e.line, std::move(e.message));
  if (!first.message.empty()) return InvalidArgument(first.message);
  return Merge(layout, blocks, rows);
}

std::string_view FormatOf(std::string_view path) {
  auto ends = [&](std::string_view ext) {
    if (path.size() < ext.size()) return false;
    for (size_t i = 0; i < ext.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(path[path.size() - ext.size() + i])) != ext[i])
        return false;
    }
    return true;
  };
  if (ends(".csv")) return "csv";
  if (ends(".jsonl") || ends(".ndjson")) return "jsonl";
  if (ends(".parquet") || ends(".pq")) return "parquet";
  return "";
}

}  // namespace

const Column* Table::Find(std::string_view name) const {
  for (const Column& c : columns) {
    if (c.spec.name == name) return &c;
  }
  return nullptr;
}

Result<Table> ReadTableString(std::string_view text, std::string_view format, const Schema& schema,
                              std::string_view origin) {
  if (text.starts_with("\xEF\xBB\xBF")) text.remove_prefix(3);  // UTF-8 byte order mark
  Result<Table> t = InvalidArgument("");
  if (format == "csv") t = ReadCsv(text, schema, origin);
  if (format == "jsonl" || format == "ndjson") t = ReadJsonl(text, schema, origin);
  if (format == "csv" || format == "jsonl" || format == "ndjson") {
    if (t.ok()) {
      t->drift_share = schema.drift_share();
      t->task = schema.task();
    }
    return t;
  }
  if (format == "parquet") {
    return Unimplemented(fmt::format(
        "{}: Parquet is not supported: Debian 12 packages no Parquet reader (Apache Arrow is not "
        "in Debian main); convert to CSV or JSON Lines first, e.g. "
        "python3 -c \"import pandas; pandas.read_parquet('in.parquet').to_csv('out.csv', "
        "index=False)\"",
        origin));
  }
  return InvalidArgument(fmt::format("{}: unknown format '{}'; use csv or jsonl", origin, format));
}

Result<Table> ReadTable(const std::string& path, const Schema& schema, std::string_view format) {
  std::string_view fmt_name = format.empty() ? FormatOf(path) : format;
  if (fmt_name.empty()) {
    return InvalidArgument(fmt::format(
        "{}: cannot tell the format from the name; use a .csv, .jsonl or .ndjson file or pass "
        "the format (--format csv|jsonl)",
        path));
  }
  if (fmt_name == "parquet") return ReadTableString("", "parquet", schema, path);
  ASSIGN_OR_RETURN(std::string text, ReadFile(path));
  return ReadTableString(text, fmt_name, schema, path);
}

}  // namespace gantry::drift
