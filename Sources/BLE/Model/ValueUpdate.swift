import Foundation

/// A value a peripheral sent of its own accord: the bytes and how they came.
///
/// Not part of CoreBluetooth, whose delegate hears notifications and indications alike as
/// `peripheral(_:didUpdateValueFor:error:)`. A swift-ble extension for tools that show which one came (an
/// indication is confirmed by the central's host; a notification is not), through
/// ``Peripheral/valueUpdates(for:)``.
public struct ValueUpdate: Sendable, Hashable {
    /// How an update came: a Handle Value Notification or a Handle Value Indication (Core Spec 5.4, Vol 3,
    /// Part F, 3.4.7.1 and 3.4.7.2).
    public enum Kind: Sendable, Hashable {
        /// Sent without confirmation (ATT_HANDLE_VALUE_NTF).
        case notification
        /// Confirmed by the central's host (ATT_HANDLE_VALUE_IND, then ATT_HANDLE_VALUE_CFM).
        case indication
    }

    /// The characteristic's new value.
    public let value: Data
    /// Whether it came by notification or by indication.
    public let kind: Kind

    public init(value: Data, kind: Kind) {
        self.value = value
        self.kind = kind
    }
}
