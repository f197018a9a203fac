import Foundation
import PackagePlugin

/// Compiles README.md's Swift code as part of the build: for the target that uses it (`readme-example`), it
/// turns the README's ```swift blocks into that target's `main.swift`, with `readme-snippets` (the tool beside
/// this plugin). A block that no longer compiles fails `swift build`, and the error points at README.md's line.
@main struct ReadmeSnippets: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: any Target) throws -> [Command] {
        let readme = context.package.directoryURL.appending(path: "README.md")
        let output = context.pluginWorkDirectoryURL.appending(path: "main.swift")
        return [
            .buildCommand(
                displayName: "Extracting the Swift code of README.md",
                executable: try context.tool(named: "readme-snippets").url,
                arguments: [readme.path(percentEncoded: false), output.path(percentEncoded: false)],
                inputFiles: [readme], outputFiles: [output])
        ]
    }
}
