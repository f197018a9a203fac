import BLECore
import NIOCore

extension HCIEvent {
    /// Disconnection Complete: a connection ended (or a Disconnect failed).
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.5.
    public struct DisconnectionComplete: HCIEventParameters {
        public static let eventCode = HCIEventCode.disconnectionComplete

        /// Status: success when the disconnection happened.
        public var status: HCIStatus
        /// Connection_Handle (0x0000...0x0EFF).
        public var handle: ConnectionHandle
        /// Reason the connection ended, e.g. Connection Timeout (0x08), Remote User Terminated (0x13),
        /// Connection Terminated By Local Host (0x16).
        public var reason: HCIStatus

        public init(status: HCIStatus = .success, handle: ConnectionHandle, reason: HCIStatus) {
            self.status = status
            self.handle = handle
            self.reason = reason
        }

        public init(parameters: inout ByteBuffer) throws {
            status = try parameters.hciReadStatus()
            handle = try parameters.hciReadHandle()
            reason = try parameters.hciReadStatus("Reason")
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(status.rawValue)
            buffer.writeInteger(handle.rawValue, endianness: .little)
            buffer.writeInteger(reason.rawValue)
        }
    }

    /// Encryption Change [v1]: encryption was started, stopped, or failed to start on a connection.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.8.
    public struct EncryptionChange: HCIEventParameters {
        public static let eventCode = HCIEventCode.encryptionChange

        public var status: HCIStatus
        /// Connection_Handle (0x0000...0x0EFF).
        public var handle: ConnectionHandle
        /// Encryption_Enabled: 0x00 off; 0x01 on (AES-CCM on LE); 0x02 AES-CCM on BR/EDR. Kept as sent.
        public var encryptionEnabled: UInt8

        /// `true` when the link is encrypted.
        public var isEncrypted: Bool { encryptionEnabled != 0 }

        public init(status: HCIStatus = .success, handle: ConnectionHandle, encryptionEnabled: UInt8) {
            self.status = status
            self.handle = handle
            self.encryptionEnabled = encryptionEnabled
        }

        public init(parameters: inout ByteBuffer) throws {
            status = try parameters.hciReadStatus()
            handle = try parameters.hciReadHandle()
            encryptionEnabled = try parameters.hciRead(UInt8.self, "Encryption_Enabled")
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(status.rawValue)
            buffer.writeInteger(handle.rawValue, endianness: .little)
            buffer.writeInteger(encryptionEnabled)
        }
    }

    /// Read Remote Version Information Complete: the peer's link-layer version and manufacturer.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.12.
    public struct ReadRemoteVersionInformationComplete: HCIEventParameters {
        public static let eventCode = HCIEventCode.readRemoteVersionInformationComplete

        public var status: HCIStatus
        /// Connection_Handle (0x0000...0x0EFF).
        public var handle: ConnectionHandle
        /// Version: the peer's LMP/LL version (Assigned Numbers).
        public var version: HCICoreVersion
        /// Company_Identifier of the peer's manufacturer.
        public var companyIdentifier: UInt16
        /// Subversion: manufacturer-defined.
        public var subversion: UInt16

        public init(
            status: HCIStatus = .success, handle: ConnectionHandle, version: HCICoreVersion,
            companyIdentifier: UInt16, subversion: UInt16
        ) {
            self.status = status
            self.handle = handle
            self.version = version
            self.companyIdentifier = companyIdentifier
            self.subversion = subversion
        }

        public init(parameters: inout ByteBuffer) throws {
            status = try parameters.hciReadStatus()
            handle = try parameters.hciReadHandle()
            version = HCICoreVersion(rawValue: try parameters.hciRead(UInt8.self, "Version"))
            companyIdentifier = try parameters.hciRead(UInt16.self, "Company_Identifier")
            subversion = try parameters.hciRead(UInt16.self, "Subversion")
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(status.rawValue)
            buffer.writeInteger(handle.rawValue, endianness: .little)
            buffer.writeInteger(version.rawValue)
            buffer.writeInteger(companyIdentifier, endianness: .little)
            buffer.writeInteger(subversion, endianness: .little)
        }
    }

    /// Encryption Key Refresh Complete: an already encrypted link now uses a new key.
    ///
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.39.
    public struct EncryptionKeyRefreshComplete: HCIEventParameters {
        public static let eventCode = HCIEventCode.encryptionKeyRefreshComplete

        public var status: HCIStatus
        /// Connection_Handle (0x0000...0x0EFF).
        public var handle: ConnectionHandle

        public init(status: HCIStatus = .success, handle: ConnectionHandle) {
            self.status = status
            self.handle = handle
        }

        public init(parameters: inout ByteBuffer) throws {
            status = try parameters.hciReadStatus()
            handle = try parameters.hciReadHandle()
        }

        public func encodeParameters(into buffer: inout ByteBuffer) {
            buffer.writeInteger(status.rawValue)
            buffer.writeInteger(handle.rawValue, endianness: .little)
        }
    }
}
