#!/usr/bin/env bash
# Builds the DocC documentation of every module of the package (the catalogues in Sources/*/*.docc and the doc
# comments) with swift-docc-plugin, treating every warning as an error: a broken link, a symbol that does not
# resolve, a parameter left undocumented beside documented ones. The modules are read from the manifest (every
# library and executable target outside Tests/ and Plugins/), so a new one is documented without a change here.
# The archives land in .build/plugins/Swift-DocC/outputs/MODULE.doccarchive.
set -euo pipefail
cd "$(dirname "$0")/.."

targets=$(swift package describe --type json | python3 -c '
import json, sys
text = sys.stdin.read()
package = json.loads(text[text.index("{"):])
for target in package["targets"]:
    if target["type"] in ("library", "executable") and not target["path"].startswith(("Tests/", "Plugins/")):
        print(target["name"])
')
args=()
for target in $targets; do args+=(--target "$target"); done
echo "documenting: $(echo $targets | tr '\n' ' ')"
swift package generate-documentation --warnings-as-errors "${args[@]}"
