// The program of this target is README.md's Swift code: the ReadmeSnippets plugin writes it to main.swift at build
// time (README.md beside this file says how it is checked). Nothing is written here.
