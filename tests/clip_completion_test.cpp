// dtrain-clip's shell completion is written from the commands' --help texts: how a usage text is
// read, and that train's --help lists exactly the flags its parser accepts.
#include <map>
#include <stdexcept>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "runtime/config/completion_script.h"
#include "runtime/config/train_options.h"

namespace dtrain::clip {
namespace {

using testing::ElementsAre;
using testing::HasSubstr;

TEST(ClipCompletion, UsageFlagsAreReadFromTheOptionColumnsOnly) {
  const std::string usage =
      "Usage: tool run --format csv|webdataset [--skip]\n"
      "\n"
      "Prose that names --not-a-flag, and `tool run --also-not` either.\n"
      "  --format csv|webdataset   how to write, or tar\n"
      "  --resume PATH|latest      where from; so --continued in prose is no flag\n"
      "                            a continuation line, --still-prose\n"
      "  --no-pairs                skip the pairs\n"
      "  --epochs N (1)  --lr X (1e-3)  --local-loss   --gather-with-grad\n"
      "  --device cpu|cuda|cuda:N  where\n"
      "  --channels 1|3\n"
      "  --format csv              a second mention changes nothing\n";
  const std::vector<UsageFlag> flags = FlagsOfUsage(usage);
  std::vector<std::string> names;
  for (const UsageFlag& f : flags) names.push_back(f.name);
  EXPECT_THAT(names, ElementsAre("--format", "--resume", "--no-pairs", "--epochs", "--lr",
                                 "--local-loss", "--gather-with-grad", "--device", "--channels"));
  std::map<std::string, UsageFlag> by_name;
  for (const UsageFlag& f : flags) by_name[f.name] = f;
  EXPECT_TRUE(by_name["--format"].takes_value);
  EXPECT_THAT(by_name["--format"].choices, ElementsAre("csv", "webdataset"));
  EXPECT_FALSE(by_name["--format"].other_values);
  EXPECT_EQ(by_name["--format"].description, "how to write, or tar");
  EXPECT_THAT(by_name["--resume"].choices, ElementsAre("latest"));
  EXPECT_TRUE(by_name["--resume"].other_values);
  EXPECT_FALSE(by_name["--no-pairs"].takes_value);
  EXPECT_EQ(by_name["--no-pairs"].description, "skip the pairs");
  EXPECT_TRUE(by_name["--epochs"].takes_value);
  EXPECT_TRUE(by_name["--epochs"].choices.empty());
  EXPECT_EQ(by_name["--epochs"].description, "(1)");
  EXPECT_TRUE(by_name["--lr"].takes_value);
  EXPECT_FALSE(by_name["--local-loss"].takes_value);
  EXPECT_FALSE(by_name["--gather-with-grad"].takes_value);
  EXPECT_THAT(by_name["--device"].choices, ElementsAre("cpu", "cuda"));
  EXPECT_TRUE(by_name["--device"].other_values);
  EXPECT_THAT(by_name["--channels"].choices, ElementsAre("1", "3"));
}

// What completion offers for train is what its --help lists; this holds the help text to the
// parser's own tables, both ways.
TEST(ClipCompletion, TrainHelpListsExactlyTheFlagsTheParserAccepts) {
  std::map<std::string, bool> documented;
  for (const UsageFlag& f : FlagsOfUsage(TrainHelpText())) documented[f.name] = f.takes_value;
  const std::map<std::string, bool> accepted = TrainFlags();
  for (const auto& [name, takes_value] : accepted) {
    auto it = documented.find(name);
    if (it == documented.end()) {
      ADD_FAILURE() << name << " is accepted by dtrain-clip train but missing from its --help";
      continue;
    }
    EXPECT_EQ(it->second, takes_value) << name << (takes_value ? " takes a value" : " is a switch")
                                       << " but --help writes it otherwise";
  }
  for (const auto& [name, takes_value] : documented) {
    EXPECT_TRUE(accepted.count(name)) << name << " is in train --help but the parser refuses it";
  }
  EXPECT_GE(accepted.size(), 50u);
}

TEST(ClipCompletion, ScriptsForTheThreeShellsAndNoOther) {
  const std::vector<CompletionCommand> commands = {
      {"run", "run it", "  --format csv|webdataset   how\n  --out DIR   where\n", {}},
      {"completion", "a script", "", {"bash", "zsh", "fish"}}};
  const std::string bash = CompletionScript("bash", "my-tool", commands);
  EXPECT_THAT(bash, HasSubstr("_my_tool() {"));
  EXPECT_THAT(bash, HasSubstr("compgen -W 'run completion --help --version'"));
  EXPECT_THAT(bash, HasSubstr("opts='--format --out --help'"));
  EXPECT_THAT(bash, HasSubstr("--format)\n        COMPREPLY=($(compgen -W 'csv webdataset'"));
  EXPECT_THAT(bash, HasSubstr("complete -o filenames -F _my_tool my-tool\n"));
  const std::string zsh = CompletionScript("zsh", "my-tool", commands);
  EXPECT_EQ(zsh.rfind("#compdef my-tool\n", 0), 0u);
  EXPECT_THAT(zsh, HasSubstr("bashcompinit"));
  const std::string fish = CompletionScript("fish", "my-tool", commands);
  EXPECT_THAT(fish, HasSubstr("-n '__fish_seen_subcommand_from run' -l format -x -a 'csv "
                              "webdataset' -d 'how'\n"));
  EXPECT_THAT(fish, HasSubstr("-l out -r -d 'where'\n"));
  EXPECT_THAT(fish, HasSubstr("__fish_seen_subcommand_from completion' -f -a 'bash zsh fish'"));
  EXPECT_THROW(CompletionScript("tcsh", "my-tool", commands), std::invalid_argument);
}

}  // namespace
}  // namespace dtrain::clip
