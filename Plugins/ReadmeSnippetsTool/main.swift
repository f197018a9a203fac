import Foundation

// readme-snippets README OUTPUT: writes the Swift code blocks of README to OUTPUT as one program (the
// `readme-example` target's main.swift), each block after a `#sourceLocation` naming its lines in README, so a
// compiler error points there. A block that is a package manifest (its first line starts with
// `// swift-tools-version`) is left out: Scripts/check-readme.py checks those. With no Swift block at all it fails,
// so that a README that lost its example does not pass unnoticed.

let arguments = CommandLine.arguments
guard arguments.count == 3 else {
    FileHandle.standardError.write(Data("usage: readme-snippets README OUTPUT\n".utf8))
    exit(64)
}
let readmePath = arguments[1]
let outputPath = arguments[2]

guard let readme = try? String(contentsOfFile: readmePath, encoding: .utf8) else {
    FileHandle.standardError.write(Data("readme-snippets: cannot read \(readmePath)\n".utf8))
    exit(1)
}

struct Block {
    var firstLine: Int  // 1-based line in README of the block's first line of code
    var lines: [String]
}

var blocks: [Block] = []
var current: Block?
for (index, line) in readme.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
    let trimmed = line.trimmingCharacters(in: .whitespaces)
    if var block = current {
        if trimmed == "```" {
            blocks.append(block)
            current = nil
        } else {
            block.lines.append(String(line))
            current = block
        }
    } else if trimmed == "```swift" {
        current = Block(firstLine: index + 2, lines: [])
    }
}
if current != nil {
    FileHandle.standardError.write(Data("readme-snippets: \(readmePath) has a ```swift block that never ends\n".utf8))
    exit(1)
}

let program = blocks.filter { !($0.lines.first ?? "").hasPrefix("// swift-tools-version") }
guard !program.isEmpty else {
    FileHandle.standardError.write(Data("readme-snippets: \(readmePath) has no Swift code block to compile\n".utf8))
    exit(1)
}

var text = "// Generated from README.md by readme-snippets at build time; edit README.md, not this file.\n"
for block in program {
    text += "#sourceLocation(file: \"\(readmePath)\", line: \(block.firstLine))\n"
    text += block.lines.joined(separator: "\n") + "\n"
    text += "#sourceLocation()\n"
}
do {
    try text.write(toFile: outputPath, atomically: true, encoding: .utf8)
} catch {
    FileHandle.standardError.write(Data("readme-snippets: cannot write \(outputPath): \(error)\n".utf8))
    exit(1)
}
