import Foundation
import Synchronization

/// Where a `BTSnoopWriter` puts its bytes. `write` receives the header once, then one whole record per call.
public protocol BTSnoopSink: Sendable {
    /// Writes `bytes` (the header, or one whole record).
    func write(_ bytes: [UInt8]) throws
    /// Releases the destination; later writes are not made.
    func close()
}

/// A btsnoop file, written through `FileHandle`.
///
/// Each record is handed to the kernel in one `write` as it is recorded (FileHandle keeps no buffer of its
/// own), so a process that crashes leaves a file that is readable up to its last record. With
/// `synchronizeEachRecord` every record is also forced to the disk (`fsync`), which survives a power loss at a
/// large cost in speed.
public final class BTSnoopFileSink: BTSnoopSink {
    /// The file's path.
    public let path: String
    private let synchronizeEachRecord: Bool
    // nil once closed; the Mutex serialises writes and close.
    private let handle: Mutex<FileHandle?>

    /// Creates (or truncates) the file at `path`.
    ///
    /// - Throws: `TransportError` `.openFailed` naming the path when it cannot be created.
    public init(path: String, synchronizeEachRecord: Bool = false) throws {
        self.path = path
        self.synchronizeEachRecord = synchronizeEachRecord
        guard FileManager.default.createFile(atPath: path, contents: nil),
            let handle = FileHandle(forWritingAtPath: path)
        else {
            throw TransportError(.openFailed, "btsnoop: cannot create \(path)")
        }
        self.handle = Mutex(handle)
    }

    public func write(_ bytes: [UInt8]) throws {
        try handle.withLock { handle in
            guard let handle else { return }
            try handle.write(contentsOf: bytes)
            if synchronizeEachRecord { try handle.synchronize() }
        }
    }

    public func close() {
        handle.withLock { handle in
            try? handle?.close()
            handle = nil
        }
    }

    deinit { close() }
}
