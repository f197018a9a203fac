import BLECore
import BLEGATT
import BLEHost
import Foundation
import Synchronization

/// A remote central connected to this device's `PeripheralManager` (`CBCentral`).
public final class Central: Sendable, Hashable, CustomStringConvertible {
    /// Stable for this central's address, as `CBPeer.identifier`.
    public let identifier: UUID
    /// The central's device address as its link came up (a resolvable private address when it uses privacy and
    /// is not bonded yet). CoreBluetooth hides it; a tool's server log shows it (a swift-ble extension).
    public let address: BluetoothAddress
    let handle: Mutex<UInt16>
    let mtu: Mutex<Int>
    /// The host of the link, to read its parameters.
    let host: HostDriver?
    /// Cleared when the link ends: its handle may then name another link.
    let isLinked = Mutex(true)

    init(identifier: UUID, address: BluetoothAddress, handle: UInt16, mtu: Int, host: HostDriver? = nil) {
        self.identifier = identifier
        self.address = address
        self.handle = Mutex(handle)
        self.mtu = Mutex(mtu)
        self.host = host
    }

    /// The link's current parameters (see `LinkParameters`); nil once the central is gone.
    public var link: LinkParameters? {
        let handle = ConnectionHandle(handle.withLock { $0 })
        guard isLinked.withLock({ $0 }), let host, let info = host.linkInfo(on: handle) else { return nil }
        return LinkParameters(info, mtu: host.mtu(on: handle))
    }

    /// The longest value one notification or indication carries to this central: ATT_MTU - 3, but never more
    /// than 512, the longest attribute value (Core Spec 5.4, Vol 3, Part F, 3.2.9).
    public var maximumUpdateValueLength: Int { min(mtu.withLock { $0 } - 3, 512) }

    public var description: String { "<Central \(identifier)>" }
    public static func == (a: Central, b: Central) -> Bool { a.identifier == b.identifier }
    public func hash(into hasher: inout Hasher) { hasher.combine(identifier) }
}

/// A read or write a remote central sent to a characteristic this device publishes (`CBATTRequest`).
///
/// For a read, set `value` (the bytes from `offset` on) and answer with `respond(to:withResult:)`. A long
/// write arrives as one array of requests, one per prepared part with its offset; answer once, through the
/// first request. A swift-ble addition: an app that refuses one part may answer through that part's request
/// instead, and the central's Error Response then names that part's attribute (Core Spec 5.4, Vol 3, Part F,
/// 3.4.6.3); through the first, it names the first. `ATTRequest.apply(_:for:to:)` applies the parts to a
/// value.
public final class ATTRequest: Sendable, CustomStringConvertible {
    public let central: Central
    public let characteristic: Characteristic
    public let offset: Int
    let storage: Mutex<Data?>
    let id: UInt64?
    /// The attribute the request is for (the characteristic value's handle), which a refusal of a queued write
    /// names.
    let attribute: UInt16?
    /// Whether the central wrote without response (ATT Write Command): nothing is answered, and `respond` is
    /// ignored. Our own addition (CoreBluetooth does not say): a device that must treat the two differently, a
    /// small buffer that answers requests only when it has room but drops commands that overflow it, can.
    public let isWriteCommand: Bool

    init(
        central: Central, characteristic: Characteristic, offset: Int, value: Data?, id: UInt64?,
        isWriteCommand: Bool = false, attribute: UInt16? = nil
    ) {
        self.central = central
        self.characteristic = characteristic
        self.offset = offset
        self.storage = Mutex(value)
        self.id = id
        self.attribute = attribute
        self.isWriteCommand = isWriteCommand
    }

    /// For a write, the bytes written; for a read, what the application answers with.
    public var value: Data? {
        get { storage.withLock { $0 } }
        set { storage.withLock { $0 = newValue } }
    }

    public var description: String {
        "<ATTRequest \(characteristic.uuid.uuidString) offset=\(offset) value=\(value.map { $0.hexString } ?? "nil")>"
    }
}

extension ATTRequest {
    /// Applies the parts of one write that are for `characteristic` to its current `value`, as the Core
    /// Specification says a queued write executes: each part, in the order the central queued it, overwrites the
    /// value from its offset and extends it past the end; a write whose first part starts at offset 0 is a
    /// whole new value, ending where its farthest part ends; one that starts further in keeps the octets it does
    /// not reach. A swift-ble addition (CoreBluetooth leaves it to each app).
    ///
    /// Returns `.success`, with `value` changed, or the code to answer the write with, `value` untouched: Invalid
    /// Offset for a part that starts past the value's end, Invalid Attribute Value Length for a value over 512
    /// octets.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 3, Part F, 3.4.6.1-3.4.6.3; Part G, 4.9.4-4.9.5.
    public static func apply(
        _ requests: [ATTRequest], for characteristic: Characteristic, to value: inout Data
    ) -> ATTErrorCode {
        let parts = requests.lazy.filter { $0.characteristic === characteristic }
            .map { (offset: $0.offset, value: [UInt8]($0.value ?? Data())) }
        switch GATTQueuedWrites.value(applying: parts, to: [UInt8](value)) {
        case .success(let written):
            value = Data(written)
            return .success
        case .failure(let refusal):
            return refusal.code
        }
    }
}
