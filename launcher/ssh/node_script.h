// A shell script of templates/ as it crosses the wire to a node: the comment lines and the
// indentation, which the reader of the file needs and the node's shell does not, left out (a
// slow link pays for every byte of every command, and they go with every heartbeat and sync).
#pragma once

#include <string>
#include <string_view>

namespace dtrain {

// `script` without its comment lines (a '#' first after the indentation), its empty lines and
// the spaces that start its lines. For scripts with no here-document and no quoted text whose
// lines start with spaces or '#' that matter (those of templates/ this is used on).
std::string ScriptOnTheWire(std::string_view script);

}  // namespace dtrain
