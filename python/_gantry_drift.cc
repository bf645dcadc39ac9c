// _gantry._drift: the native half of gantry.drift (python/gantry/drift.py).
//
// Thin wrappers over include/gantry/drift/{stats,drift}.h:
//  - Arrays arrive as py::array_t<..., c_style | forcecast>: a C-contiguous
//    array of the right dtype (float64, int32) is viewed in place, anything
//    else (lists, float32, strided views) is converted once by numpy.
//  - Functions that only read (bins, histograms, distances, model quality) run
//    on spans over the caller's memory, no copy. KS, Wasserstein and
//    Anderson-Darling sort their inputs in place, so they copy into vectors
//    first (the caller's arrays are never modified), and compare() copies into
//    the Table the engine owns.
//  - The GIL is released around every computation; the arrays stay referenced
//    by the caller's frame meanwhile, so their memory stays valid.
// Status errors: InvalidArgument becomes ValueError, anything else
// RuntimeError with the status code's name in front of the message.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "gantry/core/json.h"
#include "gantry/core/status.h"
#include "gantry/drift/drift.h"
#include "gantry/drift/stats.h"

namespace py = pybind11;

namespace gantry::python {
namespace {

using DoubleArray = py::array_t<double, py::array::c_style | py::array::forcecast>;
using Int32Array = py::array_t<int32_t, py::array::c_style | py::array::forcecast>;
using Int64Array = py::array_t<int64_t, py::array::c_style | py::array::forcecast>;

[[noreturn]] void Raise(const Status& status) {
  if (status.code() == StatusCode::kInvalidArgument) throw py::value_error(status.message());
  throw std::runtime_error(std::string(StatusCodeName(status.code())) + ": " + status.message());
}

template <typename T>
T Take(Result<T> result) {
  if (!result.ok()) Raise(result.status());
  return std::move(result).value();
}

// A 1-D view of `a`; `what` names the argument in the error.
template <typename T>
std::span<const T> View(const py::array_t<T, py::array::c_style | py::array::forcecast>& a,
                        const char* what) {
  if (a.ndim() != 1) {
    throw py::value_error(std::string(what) + ": expected a 1-D array, got " +
                          std::to_string(a.ndim()) + " dimensions");
  }
  return {a.data(), static_cast<size_t>(a.shape(0))};
}

std::vector<double> Copy(const DoubleArray& a, const char* what) {
  std::span<const double> v = View(a, what);
  return std::vector<double>(v.begin(), v.end());
}

// Counts from Python ints: non-negative, as uint64.
std::vector<uint64_t> Counts(const Int64Array& a, const char* what) {
  std::span<const int64_t> v = View(a, what);
  std::vector<uint64_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] < 0) {
      throw py::value_error(std::string(what) + "[" + std::to_string(i) +
                            "] = " + std::to_string(v[i]) + " is negative; counts must be >= 0");
    }
    out[i] = static_cast<uint64_t>(v[i]);
  }
  return out;
}

template <typename T>
py::array_t<T> ToNumpy(const std::vector<T>& v) {
  py::array_t<T> out(static_cast<py::ssize_t>(v.size()));
  if (!v.empty()) std::memcpy(out.mutable_data(), v.data(), v.size() * sizeof(T));
  return out;
}

py::tuple TestTuple(const drift::TestResult& r) {
  return py::make_tuple(r.statistic,
                        r.p_value < 0 ? py::object(py::none()) : py::float_(r.p_value));
}

// ---------------------------------------------------------- statistics --

py::tuple KsTwoSample(const DoubleArray& a, const DoubleArray& b, const std::string& method) {
  drift::KsMethod m;
  if (method == "auto") {
    m = drift::KsMethod::kAuto;
  } else if (method == "exact") {
    m = drift::KsMethod::kExact;
  } else if (method == "asymp") {
    m = drift::KsMethod::kAsymptotic;
  } else {
    throw py::value_error("method='" + method + "': expected 'auto', 'exact' or 'asymp'");
  }
  std::vector<double> x = Copy(a, "a"), y = Copy(b, "b");
  Result<drift::TestResult> r = Status();
  {
    py::gil_scoped_release release;
    r = drift::KsTwoSample(x, y, m);
  }
  return TestTuple(Take(std::move(r)));
}

double Wasserstein(const DoubleArray& u, const DoubleArray& v, bool normed) {
  std::vector<double> x = Copy(u, "u"), y = Copy(v, "v");
  Result<double> r = Status();
  {
    py::gil_scoped_release release;
    r = normed ? drift::WassersteinNormed(x, y) : drift::Wasserstein(x, y);
  }
  return Take(std::move(r));
}

py::tuple AndersonDarling(const DoubleArray& a, const DoubleArray& b) {
  std::vector<double> x = Copy(a, "a"), y = Copy(b, "b");
  Result<drift::TestResult> r = Status();
  {
    py::gil_scoped_release release;
    r = drift::AndersonDarling(x, y);
  }
  return TestTuple(Take(std::move(r)));
}

// The share-based distances, by name.
double Distance(const std::string& name, const DoubleArray& p, const DoubleArray& q) {
  std::span<const double> x = View(p, "p"), y = View(q, "q");
  Result<double> r = Status();
  {
    py::gil_scoped_release release;
    if (name == "psi") {
      r = drift::Psi(x, y);
    } else if (name == "jensenshannon") {
      r = drift::JensenShannon(x, y);
    } else if (name == "hellinger") {
      r = drift::Hellinger(x, y);
    } else {
      r = drift::LInfinity(x, y);
    }
  }
  return Take(std::move(r));
}

py::tuple CountTest(const std::string& name, const Int64Array& ref, const Int64Array& cur) {
  std::vector<uint64_t> r = Counts(ref, "reference_counts"), c = Counts(cur, "current_counts");
  Result<drift::TestResult> out =
      name == "chisquare" ? drift::ChiSquared(r, c) : drift::ZTestProportions(r, c);
  return TestTuple(Take(std::move(out)));
}

// Edges over `values`, or over the union of `values` and `other` (no
// concatenation) when `other` is given.
py::array_t<double> BinEdges(const DoubleArray& values, const std::string& binning, int bins,
                             const std::optional<DoubleArray>& other) {
  drift::Binning b = Take(drift::ParseBinning(binning));
  std::span<const double> v = View(values, "values"), w;
  if (other) w = View(*other, "other");
  Result<std::vector<double>> edges = Status();
  {
    py::gil_scoped_release release;
    edges = other ? drift::BinEdgesOfUnion(v, w, b, bins) : drift::BinEdges(v, b, bins);
  }
  return ToNumpy(Take(std::move(edges)));
}

py::dict Histogram(const DoubleArray& values, const DoubleArray& edges) {
  std::span<const double> v = View(values, "values"), e = View(edges, "edges");
  if (e.size() < 2) throw py::value_error("edges: need at least 2 edges (1 bin)");
  for (size_t i = 1; i < e.size(); ++i) {
    if (!(e[i - 1] < e[i])) {
      throw py::value_error("edges: not strictly increasing at index " + std::to_string(i));
    }
  }
  drift::Histogram h;
  std::vector<double> shares;
  {
    py::gil_scoped_release release;
    h = drift::Bin(v, e);
    shares = drift::Shares(h);
  }
  py::dict d;
  d["counts"] = ToNumpy(h.counts);
  d["below"] = h.below;
  d["above"] = h.above;
  d["nulls"] = h.nulls;
  d["shares"] = ToNumpy(shares);
  return d;
}

py::dict Classification(const Int32Array& labels, const Int32Array& predictions, int k,
                        const std::optional<DoubleArray>& scores) {
  std::span<const int32_t> l = View(labels, "labels"), p = View(predictions, "predictions");
  std::span<const double> s;
  if (scores) s = View(*scores, "scores");
  Result<drift::ClassificationQuality> r = Status();
  {
    py::gil_scoped_release release;
    r = drift::Classification(l, p, k, s);
  }
  drift::ClassificationQuality q = Take(std::move(r));
  py::dict d;
  d["accuracy"] = q.accuracy;
  d["precision_macro"] = q.precision_macro;
  d["recall_macro"] = q.recall_macro;
  d["f1_macro"] = q.f1_macro;
  d["precision_weighted"] = q.precision_weighted;
  d["recall_weighted"] = q.recall_weighted;
  d["f1_weighted"] = q.f1_weighted;
  d["roc_auc"] = q.roc_auc < 0 ? py::object(py::none()) : py::float_(q.roc_auc);
  return d;
}

py::dict Regression(const DoubleArray& labels, const DoubleArray& predictions) {
  std::span<const double> l = View(labels, "labels"), p = View(predictions, "predictions");
  Result<drift::RegressionQuality> r = Status();
  {
    py::gil_scoped_release release;
    r = drift::Regression(l, p);
  }
  drift::RegressionQuality q = Take(std::move(r));
  py::dict d;
  d["mae"] = q.mae;
  d["mse"] = q.mse;
  d["rmse"] = q.rmse;
  d["r2"] = q.r2;
  return d;
}

std::string DefaultTest(const std::string& kind, uint64_t reference_rows, uint64_t n_unique) {
  drift::ColumnKind k;
  if (kind == "numerical") {
    k = drift::ColumnKind::kNumerical;
  } else if (kind == "categorical") {
    k = drift::ColumnKind::kCategorical;
  } else {
    throw py::value_error("kind='" + kind + "': expected 'numerical' or 'categorical'");
  }
  return std::string(drift::StatTestName(drift::DefaultStatTest(k, reference_rows, n_unique)));
}

// ------------------------------------------------------------- compare --

drift::Role ParseRole(const std::string& name, const std::string& column) {
  if (name == "feature") return drift::Role::kFeature;
  if (name == "target") return drift::Role::kTarget;
  if (name == "prediction") return drift::Role::kPrediction;
  if (name == "score") return drift::Role::kScore;
  if (name == "ignore") return drift::Role::kIgnore;
  throw py::value_error("column '" + column + "': role '" + name +
                        "' is not one of feature, target, prediction, score, ignore");
}

// One column spec from the dict the Python layer builds: name, kind, role,
// test (str or None), threshold (float or None), binning, bins.
drift::ColumnSpec SpecFromDict(const py::dict& d) {
  drift::ColumnSpec spec;
  spec.name = d["name"].cast<std::string>();
  std::string kind = d["kind"].cast<std::string>();
  if (kind == "numerical") {
    spec.kind = drift::ColumnKind::kNumerical;
  } else if (kind == "categorical") {
    spec.kind = drift::ColumnKind::kCategorical;
  } else {
    throw py::value_error("column '" + spec.name + "': kind '" + kind +
                          "' is not 'numerical' or 'categorical'");
  }
  spec.role = ParseRole(d["role"].cast<std::string>(), spec.name);
  if (!d["test"].is_none()) {
    Result<drift::StatTest> t = drift::ParseStatTest(d["test"].cast<std::string>());
    if (!t.ok()) throw py::value_error("column '" + spec.name + "': " + t.status().message());
    spec.test = *t;
  }
  if (!d["threshold"].is_none()) spec.threshold = d["threshold"].cast<double>();
  Result<drift::Binning> b = drift::ParseBinning(d["binning"].cast<std::string>());
  if (!b.ok()) throw py::value_error("column '" + spec.name + "': " + b.status().message());
  spec.binning = *b;
  spec.bins = d["bins"].cast<int>();
  return spec;
}

// Fills `table` from parallel lists: numerical columns take float64 arrays
// (NaN = null), categorical ones int32 codes (-1 = null) into `dictionary`.
// The arrays are read without the GIL by the caller-provided views.
struct PendingColumn {
  std::span<const double> numbers;
  std::span<const int32_t> codes;
};

void FillTable(const std::vector<drift::ColumnSpec>& specs,
               const std::vector<std::vector<std::string>>& dictionaries,
               const std::vector<PendingColumn>& data, uint64_t rows, drift::Table* table) {
  table->rows = rows;
  table->columns.resize(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    drift::Column& c = table->columns[i];
    c.spec = specs[i];
    if (c.spec.kind == drift::ColumnKind::kNumerical) {
      c.numbers.assign(data[i].numbers.begin(), data[i].numbers.end());
      for (double x : c.numbers) c.nulls += std::isnan(x) ? 1 : 0;
    } else {
      c.codes.assign(data[i].codes.begin(), data[i].codes.end());
      c.dictionary = dictionaries[i];
      for (int32_t x : c.codes) c.nulls += x < 0 ? 1 : 0;
    }
  }
}

std::vector<PendingColumn> Views(const std::vector<drift::ColumnSpec>& specs,
                                 const std::vector<std::vector<std::string>>& dictionaries,
                                 const py::list& arrays, uint64_t rows, const char* side,
                                 std::vector<py::object>* keep) {
  if (arrays.size() != specs.size()) {
    throw py::value_error(std::string(side) + ": " + std::to_string(arrays.size()) +
                          " arrays for " + std::to_string(specs.size()) + " columns");
  }
  std::vector<PendingColumn> out(specs.size());
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string what = std::string(side) + " column '" + specs[i].name + "'";
    size_t n = 0;
    if (specs[i].kind == drift::ColumnKind::kNumerical) {
      auto a = arrays[i].cast<DoubleArray>();
      out[i].numbers = View(a, what.c_str());
      n = out[i].numbers.size();
      keep->push_back(std::move(a));
    } else {
      auto a = arrays[i].cast<Int32Array>();
      out[i].codes = View(a, what.c_str());
      n = out[i].codes.size();
      const int32_t k = static_cast<int32_t>(dictionaries[i].size());
      for (int32_t code : out[i].codes) {
        if (code < -1 || code >= k) {
          throw py::value_error(what + ": code " + std::to_string(code) +
                                " outside the dictionary of " + std::to_string(k));
        }
      }
      keep->push_back(std::move(a));
    }
    if (n != rows) {
      throw py::value_error(what + " has " + std::to_string(n) + " rows, the table " +
                            std::to_string(rows));
    }
  }
  return out;
}

std::vector<drift::ColumnSpec> Specs(const py::list& spec_dicts,
                                     const std::vector<std::vector<std::string>>& dicts) {
  std::vector<drift::ColumnSpec> specs;
  for (const py::handle h : spec_dicts) specs.push_back(SpecFromDict(h.cast<py::dict>()));
  if (dicts.size() != specs.size()) throw py::value_error("one dictionary per column expected");
  return specs;
}

// The reference's profile (what `gantry drift profile` saves), from arrays.
drift::Profile BuildProfile(const py::list& spec_dicts,
                            const std::vector<std::vector<std::string>>& dicts,
                            const py::list& reference, uint64_t rows, double drift_share,
                            const std::string& task) {
  std::vector<drift::ColumnSpec> specs = Specs(spec_dicts, dicts);
  if (!task.empty() && task != "classification" && task != "regression") {
    throw py::value_error("task='" + task + "': expected 'classification', 'regression' or ''");
  }
  if (!(drift_share > 0 && drift_share <= 1)) {
    throw py::value_error("drift_share=" + std::to_string(drift_share) + ": expected (0, 1]");
  }
  std::vector<py::object> keep;  // the converted arrays the spans point into
  std::vector<PendingColumn> ref = Views(specs, dicts, reference, rows, "reference", &keep);
  Result<drift::Profile> profile = Status();
  {
    py::gil_scoped_release release;
    drift::Table table;
    FillTable(specs, dicts, ref, rows, &table);
    // What a schema file would set; the profile carries it into Compare.
    table.drift_share = drift_share;
    table.task = task;
    profile = drift::Profile::Build(table, drift::ProfileOptions{});
  }
  return Take(std::move(profile));
}

// Compares the current arrays with `profile`; returns the report as JSON text
// (the Python layer json.loads it), with the rendered HTML page under "html"
// when `with_html`.
std::string CompareWithProfile(const drift::Profile& profile, const py::list& spec_dicts,
                               const std::vector<std::vector<std::string>>& dicts,
                               const py::list& current, uint64_t rows, int threads,
                               bool with_html) {
  std::vector<drift::ColumnSpec> specs = Specs(spec_dicts, dicts);
  std::vector<py::object> keep;
  std::vector<PendingColumn> cur = Views(specs, dicts, current, rows, "current", &keep);
  Result<drift::DriftReport> report = Status();
  std::string html;
  {
    py::gil_scoped_release release;
    drift::Table table;
    FillTable(specs, dicts, cur, rows, &table);
    drift::CompareOptions options;
    options.threads = threads;
    report = drift::Compare(profile, table, options);
    if (report.ok() && with_html) html = report->RenderHtml();
  }
  drift::DriftReport r = Take(std::move(report));
  Json j = r.ToJson();
  if (!html.empty()) j["html"] = html;
  return j.dump();
}

const char* RoleName(drift::Role r) {
  switch (r) {
    case drift::Role::kFeature:
      return "feature";
    case drift::Role::kTarget:
      return "target";
    case drift::Role::kPrediction:
      return "prediction";
    case drift::Role::kScore:
      return "score";
    case drift::Role::kIgnore:
      return "ignore";
  }
  return "feature";
}

}  // namespace

void RegisterDrift(py::module_& parent) {
  py::module_ m = parent.def_submodule("_drift", "Native part of gantry.drift; use that instead.");
  m.def("ks_2samp", &KsTwoSample, py::arg("a"), py::arg("b"), py::arg("method") = "auto");
  m.def("wasserstein", &Wasserstein, py::arg("u"), py::arg("v"), py::arg("normed") = false);
  m.def("anderson_ksamp", &AndersonDarling, py::arg("a"), py::arg("b"));
  m.def("distance", &Distance, py::arg("name"), py::arg("p"), py::arg("q"));
  m.def("count_test", &CountTest, py::arg("name"), py::arg("reference_counts"),
        py::arg("current_counts"));
  m.def("bin_edges", &BinEdges, py::arg("values"), py::arg("binning"), py::arg("bins"),
        py::arg("other") = py::none());
  m.def("histogram", &Histogram, py::arg("values"), py::arg("edges"));
  m.def("classification", &Classification, py::arg("labels"), py::arg("predictions"), py::arg("k"),
        py::arg("scores") = py::none());
  m.def("regression", &Regression, py::arg("labels"), py::arg("predictions"));
  m.def("default_test", &DefaultTest, py::arg("kind"), py::arg("reference_rows"),
        py::arg("n_unique"));
  py::class_<drift::Profile>(m, "Profile")
      .def_static(
          "load", [](const std::string& path) { return Take(drift::Profile::Load(path)); },
          py::arg("path"))
      .def(
          "save",
          [](const drift::Profile& p, const std::string& path) {
            Status s = p.Save(path);
            if (!s.ok()) Raise(s);
          },
          py::arg("path"))
      .def_property_readonly("rows", &drift::Profile::rows)
      .def_property_readonly("drift_share", &drift::Profile::drift_share)
      .def_property_readonly("task", &drift::Profile::task)
      .def_property_readonly("columns", [](const drift::Profile& p) {
        py::list out;
        for (const auto& c : p.columns()) {
          py::dict d;
          d["name"] = c.spec.name;
          d["kind"] = c.spec.kind == drift::ColumnKind::kNumerical ? "numerical" : "categorical";
          d["role"] = RoleName(c.spec.role);
          out.append(d);
        }
        return out;
      });
  m.def("profile", &BuildProfile, py::arg("specs"), py::arg("dictionaries"), py::arg("reference"),
        py::arg("rows"), py::arg("drift_share"), py::arg("task"));
  m.def("compare", &CompareWithProfile, py::arg("profile"), py::arg("specs"),
        py::arg("dictionaries"), py::arg("current"), py::arg("rows"), py::arg("threads"),
        py::arg("with_html"));
}

}  // namespace gantry::python
