// The csv dataset type, in OpenCLIP's layout: a header row, one sample a row, the image path in
// the --csv-img-key column (relative to the CSV's folder, or absolute) and the caption in the
// --csv-caption-key column; fields may be double-quoted ("" for a quote, separators and line
// breaks inside quotes). Images are PNG or JPEG.
#include <algorithm>

#include "runtime/data/image_codec.h"
#include "runtime/data/sample_dataset.h"

namespace dtrain::clip {
namespace {

// One CSV record: the line it starts on, its fields, or what is wrong with it.
struct CsvRecord {
  int64_t line = 0;
  std::vector<std::string> fields;
  std::string error;
};

// Reads records one by one from CSV text with a one-character separator.
class CsvReader {
 public:
  CsvReader(const std::string& text, char separator) : text_(text), separator_(separator) {}

  // False at the end of the text. Blank lines are passed over.
  bool Read(CsvRecord& record) {
    while (pos_ < text_.size() && (text_[pos_] == '\n' || text_[pos_] == '\r')) {
      if (text_[pos_] == '\n') ++line_;
      ++pos_;
    }
    if (pos_ >= text_.size()) return false;
    record = CsvRecord{line_, {}, {}};
    while (true) {
      std::string field;
      if (!ReadField(field, record.error)) {
        SkipLine();
        return true;
      }
      record.fields.push_back(std::move(field));
      if (pos_ >= text_.size()) return true;
      const char c = text_[pos_++];
      if (c == '\n') {
        ++line_;
        return true;
      }
      // c is the separator: another field follows.
    }
  }

 private:
  // Reads one field up to (not including) the separator or line end.
  bool ReadField(std::string& field, std::string& error) {
    if (pos_ < text_.size() && text_[pos_] == '"') {
      const int64_t start_line = line_;
      ++pos_;
      while (true) {
        if (pos_ >= text_.size()) {
          error = "unterminated quoted field (opened on line " + std::to_string(start_line) + ")";
          return false;
        }
        const char c = text_[pos_++];
        if (c == '"') {
          if (pos_ < text_.size() && text_[pos_] == '"') {
            field += '"';
            ++pos_;
            continue;
          }
          break;
        }
        if (c == '\n') ++line_;
        field += c;
      }
      if (pos_ < text_.size() && text_[pos_] == '\r') ++pos_;
      if (pos_ < text_.size() && text_[pos_] != separator_ && text_[pos_] != '\n') {
        error = std::string("unexpected '") + text_[pos_] + "' after a closing quote";
        return false;
      }
      return true;
    }
    const size_t end = text_.find_first_of(std::string{separator_, '\n'}, pos_);
    field = text_.substr(pos_, end == std::string::npos ? std::string::npos : end - pos_);
    pos_ = end == std::string::npos ? text_.size() : end;
    if (!field.empty() && field.back() == '\r') field.pop_back();
    if (field.find('"') != std::string::npos) {
      error = "stray '\"' in an unquoted field";
      return false;
    }
    return true;
  }

  void SkipLine() {
    const size_t end = text_.find('\n', pos_);
    pos_ = end == std::string::npos ? text_.size() : end + 1;
    ++line_;
  }

  const std::string& text_;
  const char separator_;
  size_t pos_ = 0;
  int64_t line_ = 1;
};

char SeparatorChar(const std::string& separator) {
  if (separator == "\\t" || separator == "tab") return '\t';
  if (separator.size() != 1) {
    throw std::runtime_error("csv separator '" + separator + "': expected one character");
  }
  return separator[0];
}

std::string FolderOf(const std::string& path) {
  const size_t slash = path.rfind('/');
  return slash == std::string::npos ? "." : path.substr(0, slash == 0 ? 1 : slash);
}

// The rows of a CSV file, parsed once; images are read when a sample is loaded.
class CsvDataset : public SampleDataset {
 public:
  CsvDataset(const DataOptions& options, BadSampleLog& bad_log) : csv_path_(options.train_data) {
    if (csv_path_.empty()) throw std::runtime_error("csv data: no CSV file given (--train-data)");
    const std::vector<uint8_t> bytes = ReadFileBytes(csv_path_);
    // A UTF-8 byte-order mark (spreadsheet exports) is not part of the first column's name.
    const bool bom = bytes.size() >= 3 && bytes[0] == 0xef && bytes[1] == 0xbb && bytes[2] == 0xbf;
    const std::string text(bytes.begin() + (bom ? 3 : 0), bytes.end());
    CsvReader reader(text, SeparatorChar(options.csv_separator));
    CsvRecord header;
    if (!reader.Read(header) || !header.error.empty()) {
      throw std::runtime_error(csv_path_ + ":1: no header row" +
                               (header.error.empty() ? "" : ": " + header.error));
    }
    const size_t img = Column(header, options.csv_img_key, "--csv-img-key");
    const size_t caption = Column(header, options.csv_caption_key, "--csv-caption-key");
    const std::string folder = FolderOf(csv_path_);
    CsvRecord record;
    while (reader.Read(record)) {
      const std::string where = csv_path_ + ":" + std::to_string(record.line) + ": ";
      if (record.error.empty() && record.fields.size() != header.fields.size()) {
        record.error = std::to_string(record.fields.size()) + " fields, expected " +
                       std::to_string(header.fields.size()) + " as in the header";
      }
      if (record.error.empty() && record.fields[img].empty()) record.error = "empty image path";
      if (!record.error.empty()) {
        bad_log.Report(where + record.error);
        continue;
      }
      const std::string& path = record.fields[img];
      rows_.push_back(
          Row{record.line, path[0] == '/' ? path : folder + "/" + path, record.fields[caption]});
    }
    if (rows_.empty()) throw std::runtime_error(csv_path_ + ": no usable rows");
    channels_ = options.channels;
    size_ = options.image_size;
  }

  int64_t Size() const override { return static_cast<int64_t>(rows_.size()); }

  void Load(int64_t index, int, SampleSlot slot) const override {
    const Row& row = rows_[static_cast<size_t>(index)];
    try {
      WriteSample(ReadImageFile(row.image_path), channels_, size_, slot);
    } catch (const std::runtime_error& e) {
      throw BadSample(csv_path_ + ":" + std::to_string(row.line) + ": " + e.what());
    }
    slot.caption = row.caption;
    slot.label = -1;
  }

 private:
  struct Row {
    int64_t line;
    std::string image_path;
    std::string caption;
  };

  size_t Column(const CsvRecord& header, const std::string& key, const std::string& flag) const {
    auto it = std::find(header.fields.begin(), header.fields.end(), key);
    if (it != header.fields.end()) return static_cast<size_t>(it - header.fields.begin());
    std::string columns;
    for (const auto& f : header.fields) columns += (columns.empty() ? "" : ", ") + f;
    throw std::runtime_error(csv_path_ + ":1: no column '" + key + "' in the header (columns: " +
                             columns + "); choose one with " + flag + " or check --csv-separator");
  }

  std::string csv_path_;
  std::vector<Row> rows_;
  int channels_ = 1, size_ = 28;
};

}  // namespace

std::unique_ptr<SampleDataset> MakeCsvDataset(const DataOptions& options, BadSampleLog& bad_log) {
  return std::make_unique<CsvDataset>(options, bad_log);
}

}  // namespace dtrain::clip
