#include "gantry/core/table.h"

#include <algorithm>
#include <cassert>

namespace gantry {
namespace {

// Display width in code points: every byte that is not a UTF-8 continuation byte
// (10xxxxxx) starts one. Good enough for "µs" and "°C"; wide CJK glyphs are rare
// in Gantry's tables.
size_t Width(const std::string& s) {
  return static_cast<size_t>(std::count_if(
      s.begin(), s.end(), [](char c) { return (static_cast<unsigned char>(c) & 0xC0) != 0x80; }));
}

}  // namespace

Table::Table(std::vector<std::string> headers)
    : headers_(std::move(headers)), align_(headers_.size(), Align::kLeft) {}

void Table::SetAlign(size_t column, Align align) {
  assert(column < align_.size() && "Table::SetAlign: column out of range");
  if (column < align_.size()) align_[column] = align;
}

void Table::AddRow(std::vector<std::string> cells) {
  assert(cells.size() <= headers_.size() && "Table::AddRow: more cells than headers");
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

std::string Table::Render() const {
  std::vector<size_t> widths(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) {
    widths[c] = Width(headers_[c]);
    for (const auto& row : rows_) widths[c] = std::max(widths[c], Width(row[c]));
  }
  std::string out;
  auto emit = [&](const std::vector<std::string>& cells) {
    std::string line;
    for (size_t c = 0; c < cells.size(); ++c) {
      if (c > 0) line += "  ";
      std::string pad(widths[c] - Width(cells[c]), ' ');
      line += align_[c] == Align::kRight ? pad + cells[c] : cells[c] + pad;
    }
    // Left-aligned last columns would end in padding; trailing blanks only get in the way.
    line.erase(line.find_last_not_of(' ') + 1);
    out += line;
    out += '\n';
  };
  emit(headers_);
  std::vector<std::string> rule(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) rule[c] = std::string(widths[c], '-');
  emit(rule);
  for (const auto& row : rows_) emit(row);
  return out;
}

}  // namespace gantry
