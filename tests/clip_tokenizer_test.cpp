// Tokenizers: the byte-level one of fmnist-tiny and CLIP BPE on a merges file written here.
#include <gtest/gtest.h>
#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "runtime/text/bpe_tokenizer.h"
#include "runtime/text/html_entities.h"
#include "runtime/text/tokenizer.h"

namespace dtrain::clip {
namespace {

TEST(ByteTokenizer, RowsHoldStartBytesEndAndPadding) {
  ByteTokenizer tokenizer(8);
  std::vector<int64_t> rows = tokenizer.Tokenize({"ab", ""});
  EXPECT_EQ(rows, (std::vector<int64_t>{257, 'a' + 1, 'b' + 1, 258, 0, 0, 0, 0,  //
                                        257, 258, 0, 0, 0, 0, 0, 0}));
}

TEST(ByteTokenizer, TruncationKeepsTheEndToken) {
  ByteTokenizer tokenizer(5);
  std::vector<int64_t> row = tokenizer.Tokenize({"abcdefgh"});
  EXPECT_EQ(row, (std::vector<int64_t>{257, 'a' + 1, 'b' + 1, 'c' + 1, 258}));
}

TEST(ByteTokenizer, RoundTripsAnyBytes) {
  ByteTokenizer tokenizer;
  std::string text = "a photo of a t-shirt. \xc3\xa9\x01\xff";
  EXPECT_EQ(tokenizer.Decode(tokenizer.Encode(text)), text);
  std::vector<int64_t> row = tokenizer.Tokenize({"sandal"});
  EXPECT_EQ(tokenizer.Decode(row), "sandal");
}

// A merges file in OpenCLIP's format: a header line, then one "left right" pair a line.
class BpeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir();
    lines_ = {"#version: 0.2", "t h",        "th e</w>", "o f</w>", "a </w>", "p h",       "ph o",
              "pho t",         "phot o</w>", "s h",      "sh i",    "shi r",  "shir t</w>"};
  }
  std::string WritePlain(const std::string& name, const std::vector<std::string>& lines) {
    std::string path = dir_ + "/" + name;
    std::ofstream out(path);
    for (const auto& l : lines) out << l << "\n";
    return path;
  }
  std::string WriteGzip(const std::string& name, const std::vector<std::string>& lines) {
    std::string path = dir_ + "/" + name;
    gzFile f = gzopen(path.c_str(), "wb");
    for (const auto& l : lines) gzputs(f, (l + "\n").c_str());
    gzclose(f);
    return path;
  }
  std::string dir_;
  std::vector<std::string> lines_;
};

TEST_F(BpeTest, VocabularyLayoutFollowsOpenClip) {
  BpeTokenizer bpe(WriteGzip("merges.txt.gz", lines_));
  const int64_t merges = static_cast<int64_t>(lines_.size()) - 1;
  EXPECT_EQ(bpe.vocab_size(), 512 + merges + 2);
  EXPECT_EQ(bpe.start_token(), 512 + merges);
  EXPECT_EQ(bpe.end_token(), 512 + merges + 1);
  // "the" merges fully into "the</w>", the second merge (id 512 + 1).
  EXPECT_EQ(bpe.Encode("the"), (std::vector<int64_t>{513}));
  // Byte tokens: "!" is the first printable byte (id 0); "!</w>" is id 256.
  EXPECT_EQ(bpe.Encode("!"), (std::vector<int64_t>{256}));
}

TEST_F(BpeTest, GzipAndPlainFilesGiveTheSameTokens) {
  BpeTokenizer gz(WriteGzip("m.gz", lines_));
  BpeTokenizer plain(WritePlain("m.txt", lines_));
  EXPECT_EQ(gz.Encode("a photo of the shirt"), plain.Encode("a photo of the shirt"));
}

TEST_F(BpeTest, RoundTripsLowerCasedText) {
  BpeTokenizer bpe(WriteGzip("m.gz", lines_));
  for (std::string text : {"a photo of the shirt.", "the   Shirt!!", "don't stop 42 times",
                           "caf\xc3\xa9 na\xc3\xafve", "x"}) {
    std::vector<int64_t> row = bpe.Tokenize({text});
    EXPECT_EQ(row[0], bpe.start_token());
    EXPECT_EQ(static_cast<int>(row.size()), 77);
    EXPECT_EQ(bpe.Decode(row), BpeTokenizer::CleanText(text).empty() ? "" : [&] {
      // Decoding gives the cleaned text with one space between pre-tokenised words.
      std::string joined;
      for (const auto& piece : BpeTokenizer::PreTokenize(BpeTokenizer::CleanText(text))) {
        joined += (joined.empty() ? "" : " ") + piece;
      }
      return joined;
    }()) << text;
  }
  EXPECT_EQ(bpe.Decode(bpe.Tokenize({"A Photo of THE shirt"})), "a photo of the shirt");
}

TEST_F(BpeTest, PreTokenisationMatchesOpenClipsPattern) {
  EXPECT_EQ(BpeTokenizer::PreTokenize("don't stop!! a12 x.'s"),
            (std::vector<std::string>{"don", "'t", "stop", "!!", "a", "1", "2", "x", ".'", "s"}));
  EXPECT_EQ(BpeTokenizer::PreTokenize("<start_of_text>hi<end_of_text>"),
            (std::vector<std::string>{"<start_of_text>", "hi", "<end_of_text>"}));
  EXPECT_EQ(BpeTokenizer::PreTokenize("caf\xc3\xa9 \xce\xb1\xce\xb2"),
            (std::vector<std::string>{"caf\xc3\xa9", "\xce\xb1\xce\xb2"}));
  EXPECT_EQ(BpeTokenizer::CleanText("  Hello \t\n WORLD \xc3\x89  "), "hello world \xc3\xa9");
}

TEST(HtmlEntities, DecodedAsPythonsHtmlUnescape) {
  // Expected values are what Python's html.unescape returns for the same input.
  EXPECT_EQ(UnescapeHtml("Fish &amp; Chips &lt;3 &quot;hi&quot; &#39;x&#x27;"),
            "Fish & Chips <3 \"hi\" 'x'");
  EXPECT_EQ(UnescapeHtml("caf&eacute; 5&nbsp;&euro; &hellip;"),
            "caf\xc3\xa9 5\xc2\xa0\xe2\x82\xac \xe2\x80\xa6");
  EXPECT_EQ(UnescapeHtml("AT&amp T&copy"), "AT& T\xc2\xa9");  // Latin-1 names need no ';'
  EXPECT_EQ(UnescapeHtml("&hellip &bogus; & &#; &#xZZ;"), "&hellip &bogus; & &#; &#xZZ;");
  EXPECT_EQ(UnescapeHtml("&#55296;|&#0;|&#99999999999;|&#150;|&#x93;|a&#1;b"),
            "\xef\xbf\xbd|\xef\xbf\xbd|\xef\xbf\xbd|\xe2\x80\x93|\xe2\x80\x9c|ab");
  EXPECT_EQ(UnescapeHtml("&#128512;"), "\xf0\x9f\x98\x80");
  EXPECT_EQ(UnescapeHtml(UnescapeHtml("&amp;amp;")), "&");
  EXPECT_EQ(BpeTokenizer::CleanText("Tom &amp;amp; Jerry&nbsp;&nbsp;Show"), "tom & jerry show");
}

TEST_F(BpeTest, SpecialTokensInTextBecomeTheirIds) {
  BpeTokenizer bpe(WriteGzip("m.gz", lines_));
  EXPECT_EQ(bpe.Encode("<end_of_text>"), (std::vector<int64_t>{bpe.end_token()}));
}

TEST_F(BpeTest, TruncationKeepsTheEndToken) {
  BpeTokenizer bpe(WriteGzip("m.gz", lines_), 4);
  std::vector<int64_t> row = bpe.Tokenize({"the the the the the"});
  EXPECT_EQ(row, (std::vector<int64_t>{bpe.start_token(), 513, 513, bpe.end_token()}));
}

TEST_F(BpeTest, MalformedMergeLineNamesFileAndLine) {
  std::string path = WritePlain("bad.txt", {"#version: 0.2", "t h", "only-one-symbol"});
  try {
    BpeTokenizer bpe(path);
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("bad.txt:3:"), std::string::npos) << e.what();
  }
  EXPECT_THROW(BpeTokenizer(dir_ + "/missing.gz"), std::runtime_error);
}

TEST(MakeTokenizer, BpeNeedsTheVocabularyFlag) {
  TextConfig config;
  config.tokenizer = "bpe";
  config.vocab_size = 49408;
  try {
    MakeTokenizer(config, "");
    FAIL() << "expected an error";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--bpe-vocab"), std::string::npos);
  }
}

}  // namespace
}  // namespace dtrain::clip
