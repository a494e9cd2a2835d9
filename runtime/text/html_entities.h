// HTML character references in captions, decoded as OpenCLIP's basic_clean does with Python's
// html.unescape (applied twice there, so "&amp;amp;" becomes "&"). Torch-free.
#pragma once

#include <string>

namespace dtrain::clip {

// Replaces numeric references (&#39; &#x27;, with HTML's rules for invalid values) and the named
// ones web captions carry (&amp; &lt; &gt; &quot; &apos; &nbsp; quotes, dashes, ellipsis, common
// Latin-1 letters and signs) by their UTF-8 text; an unknown name is kept as written. Latin-1
// names may lack their ';', as HTML allows.
std::string UnescapeHtml(const std::string& text);

}  // namespace dtrain::clip
