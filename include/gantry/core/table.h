// Human tables for terminal output: aligned columns, a header rule, numeric
// columns right-aligned.
//
//   Table t({"check", "value", "verdict"});
//   t.SetAlign(1, Table::Align::kRight);
//   t.AddRow({"memory", "23.4 GiB", "ok"});
//   std::cout << t.Render();
#pragma once

#include <string>
#include <vector>

namespace gantry {

class Table {
 public:
  enum class Align { kLeft, kRight };
  explicit Table(std::vector<std::string> headers);

  void SetAlign(size_t column, Align align);
  // Rows shorter than the header are padded with empty cells; longer rows are an
  // error in debug builds and truncated in release builds.
  void AddRow(std::vector<std::string> cells);
  size_t rows() const { return rows_.size(); }

  // Columns separated by two spaces, header underlined with '-'. Width is
  // computed from UTF-8 code points so "µs" aligns.
  std::string Render() const;

 private:
  std::vector<std::string> headers_;
  std::vector<Align> align_;
  std::vector<std::vector<std::string>> rows_;
};

}  // namespace gantry
