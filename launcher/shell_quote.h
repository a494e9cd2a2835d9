// POSIX shell quoting: turns bytes into one shell word that a POSIX shell reads back unchanged,
// so argv and environment values cross a remote shell without anything in them being run.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace dtrain {

// One word: 'text' with every ' written as '\''. Any byte but NUL survives, including
// newlines, $(), backticks, ; and quotes. The empty string becomes ''.
std::string ShellQuote(std::string_view text);

// Each element quoted, joined by single spaces.
std::string ShellJoin(const std::vector<std::string>& words);

// True for a name a POSIX shell can export: [A-Za-z_][A-Za-z0-9_]*.
bool IsShellVariableName(std::string_view name);

}  // namespace dtrain
