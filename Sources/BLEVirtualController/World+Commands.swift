import BLECore
import DequeModule

/// HCI status codes the virtual controller returns.
/// - SeeAlso: Core Spec 5.4, Vol 1, Part F, 1.3 (list of error codes).
enum Status {
    static let success: UInt8 = 0x00
    static let unknownCommand: UInt8 = 0x01
    static let unknownConnection: UInt8 = 0x02
    static let pinOrKeyMissing: UInt8 = 0x06
    static let connectionLimitExceeded: UInt8 = 0x09
    static let connectionAlreadyExists: UInt8 = 0x0B
    static let commandDisallowed: UInt8 = 0x0C
    static let unsupportedFeature: UInt8 = 0x11
    static let invalidParameters: UInt8 = 0x12
    static let remoteUserTerminated: UInt8 = 0x13
    static let remotePowerOff: UInt8 = 0x15
    static let localHostTerminated: UInt8 = 0x16
    static let unsupportedRemoteFeature: UInt8 = 0x1A
    static let connectionTimeout: UInt8 = 0x08
    static let advertisingTimeout: UInt8 = 0x3C
    static let micFailure: UInt8 = 0x3D
    static let connectionFailedToBeEstablished: UInt8 = 0x3E
}

/// The virtual controller's identity as Read Local Version Information and LL_VERSION_IND report it:
/// Core Spec 5.4 (version 0x0D), company 0xFFFF (reserved for tests, no real manufacturer).
enum ControllerVersion {
    static let version: UInt8 = 0x0D
    static let company: UInt16 = 0xFFFF
    static let subversion: UInt16 = 0x0001
}

/// LE features this controller implements (Vol 6, Part B, 4.6): bit 0 LE Encryption, bit 1 Connection
/// Parameters Request procedure, bit 2 Extended Reject Indication, bit 3 Peripheral-initiated Features Exchange,
/// bit 5 LE Data Packet Length Extension, bit 8 LE 2M PHY, bit 11 LE Coded PHY.
let leLocalFeatures: UInt64 = (1 << 0) | (1 << 1) | (1 << 2) | (1 << 3) | (1 << 5) | (1 << 8) | (1 << 11)

/// The commands this controller implements, as (octet, bit) of the Supported_Commands bitmask.
/// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 6.27 (Supported commands).
let supportedCommandBits: [(octet: Int, bit: Int)] = [
    (0, 5),  // Disconnect
    (2, 7),  // Read Remote Version Information
    (5, 6),  // Set Event Mask
    (5, 7),  // Reset
    (7, 0),  // Write Local Name
    (7, 1),  // Read Local Name
    (14, 3),  // Read Local Version Information
    (14, 5),  // Read Local Supported Features
    (14, 7),  // Read Buffer Size
    (15, 1),  // Read BD_ADDR
    (15, 5),  // Read RSSI
    (22, 2),  // Set Event Mask Page 2
    (24, 5),  // Read LE Host Support
    (24, 6),  // Write LE Host Support
    (25, 0),  // LE Set Event Mask
    (25, 1),  // LE Read Buffer Size [v1]
    (25, 2),  // LE Read Local Supported Features
    (25, 4),  // LE Set Random Address
    (25, 5),  // LE Set Advertising Parameters
    (25, 6),  // LE Read Advertising Physical Channel Tx Power
    (25, 7),  // LE Set Advertising Data
    (26, 0),  // LE Set Scan Response Data
    (26, 1),  // LE Set Advertising Enable
    (26, 2),  // LE Set Scan Parameters
    (26, 3),  // LE Set Scan Enable
    (26, 4),  // LE Create Connection
    (26, 5),  // LE Create Connection Cancel
    (26, 6),  // LE Read Filter Accept List Size
    (26, 7),  // LE Clear Filter Accept List
    (27, 0),  // LE Add Device To Filter Accept List
    (27, 1),  // LE Remove Device From Filter Accept List
    (27, 2),  // LE Connection Update
    (27, 5),  // LE Read Remote Features
    (27, 6),  // LE Encrypt
    (27, 7),  // LE Rand
    (28, 0),  // LE Enable Encryption
    (28, 1),  // LE Long Term Key Request Reply
    (28, 2),  // LE Long Term Key Request Negative Reply
    (33, 4),  // LE Remote Connection Parameter Request Reply
    (33, 5),  // LE Remote Connection Parameter Request Negative Reply
    (33, 6),  // LE Set Data Length
    (33, 7),  // LE Read Suggested Default Data Length
    (34, 0),  // LE Write Suggested Default Data Length
    (35, 3),  // LE Read Maximum Data Length
    (35, 4),  // LE Read PHY
    (35, 5),  // LE Set Default PHY
    (35, 6),  // LE Set PHY
    (41, 5),  // LE Read Buffer Size v2
]

let supportedCommandsBitmask: [UInt8] = {
    var bytes = [UInt8](repeating: 0, count: 64)
    for (octet, bit) in supportedCommandBits { bytes[octet] |= 1 << UInt8(bit) }
    return bytes
}()

/// HCI opcodes (OGF << 10 | OCF) the controller implements.
enum Opcode {
    static let disconnect: UInt16 = 0x0406
    static let readRemoteVersionInformation: UInt16 = 0x041D
    static let setEventMask: UInt16 = 0x0C01
    static let reset: UInt16 = 0x0C03
    static let writeLocalName: UInt16 = 0x0C13
    static let readLocalName: UInt16 = 0x0C14
    static let setEventMaskPage2: UInt16 = 0x0C63
    static let readLEHostSupport: UInt16 = 0x0C6C
    static let writeLEHostSupport: UInt16 = 0x0C6D
    static let readLocalVersionInformation: UInt16 = 0x1001
    static let readLocalSupportedCommands: UInt16 = 0x1002
    static let readLocalSupportedFeatures: UInt16 = 0x1003
    static let readBufferSize: UInt16 = 0x1005
    static let readBDADDR: UInt16 = 0x1009
    static let readRSSI: UInt16 = 0x1405
    static let leSetEventMask: UInt16 = 0x2001
    static let leReadBufferSize: UInt16 = 0x2002
    static let leReadLocalSupportedFeatures: UInt16 = 0x2003
    static let leSetRandomAddress: UInt16 = 0x2005
    static let leSetAdvertisingParameters: UInt16 = 0x2006
    static let leReadAdvertisingChannelTxPower: UInt16 = 0x2007
    static let leSetAdvertisingData: UInt16 = 0x2008
    static let leSetScanResponseData: UInt16 = 0x2009
    static let leSetAdvertisingEnable: UInt16 = 0x200A
    static let leSetScanParameters: UInt16 = 0x200B
    static let leSetScanEnable: UInt16 = 0x200C
    static let leCreateConnection: UInt16 = 0x200D
    static let leCreateConnectionCancel: UInt16 = 0x200E
    static let leReadFilterAcceptListSize: UInt16 = 0x200F
    static let leClearFilterAcceptList: UInt16 = 0x2010
    static let leAddDeviceToFilterAcceptList: UInt16 = 0x2011
    static let leRemoveDeviceFromFilterAcceptList: UInt16 = 0x2012
    static let leConnectionUpdate: UInt16 = 0x2013
    static let leReadRemoteFeatures: UInt16 = 0x2016
    static let leEncrypt: UInt16 = 0x2017
    static let leRand: UInt16 = 0x2018
    static let leEnableEncryption: UInt16 = 0x2019
    static let leLongTermKeyRequestReply: UInt16 = 0x201A
    static let leLongTermKeyRequestNegativeReply: UInt16 = 0x201B
    static let leRemoteConnectionParameterRequestReply: UInt16 = 0x2020
    static let leRemoteConnectionParameterRequestNegativeReply: UInt16 = 0x2021
    static let leSetDataLength: UInt16 = 0x2022
    static let leReadSuggestedDefaultDataLength: UInt16 = 0x2023
    static let leWriteSuggestedDefaultDataLength: UInt16 = 0x2024
    static let leReadMaximumDataLength: UInt16 = 0x202F
    static let leReadPHY: UInt16 = 0x2030
    static let leSetDefaultPHY: UInt16 = 0x2031
    static let leSetPHY: UInt16 = 0x2032
    static let leReadBufferSizeV2: UInt16 = 0x2060
}

let filterAcceptListSize: UInt8 = 16

extension World {
    /// Executes one HCI command and answers with Command Complete or Command Status (and, for asynchronous
    /// commands, the later events). Unknown opcodes get Command Complete with Unknown HCI Command.
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 4.4 (command flow control), 7 (commands and events).
    func handleCommand(_ c: ControllerState, opcode op: UInt16, parameters: [UInt8]) {
        var r = ByteReader(parameters)
        func ok(_ rest: [UInt8] = []) { commandComplete(c, op, [Status.success] + rest) }
        func fail(_ status: UInt8, _ rest: [UInt8] = []) { commandComplete(c, op, [status] + rest) }
        func le16(_ v: UInt16) -> [UInt8] { [UInt8(v & 0xFF), UInt8(v >> 8)] }
        func le16(_ v: Int) -> [UInt8] { le16(UInt16(clamping: v)) }

        switch op {
        case Opcode.reset:
            reset(c)
            ok()

        case Opcode.setEventMask:
            guard let mask = r.u64() else { return fail(Status.invalidParameters) }
            c.eventMask = mask
            ok()

        case Opcode.setEventMaskPage2:
            guard let mask = r.u64() else { return fail(Status.invalidParameters) }
            c.eventMaskPage2 = mask
            ok()

        case Opcode.leSetEventMask:
            guard let mask = r.u64() else { return fail(Status.invalidParameters) }
            c.leEventMask = mask
            ok()

        case Opcode.readLEHostSupport:
            ok([c.leHostSupported ? 1 : 0, 0])

        case Opcode.writeLEHostSupport:
            guard let le = r.u8(), r.u8() != nil, le <= 1 else { return fail(Status.invalidParameters) }
            c.leHostSupported = le == 1
            ok()

        case Opcode.writeLocalName:
            // Vol 4, Part E, 7.3.11: 248 octets, UTF-8, ended by a NUL when shorter.
            guard let name = r.bytes(248) else { return fail(Status.invalidParameters) }
            c.localName = Array(name.prefix { $0 != 0 })
            ok()

        case Opcode.readLocalName:
            // Vol 4, Part E, 7.3.12: the status, then the name in 248 octets, padded with NULs.
            ok(Array(c.localName.prefix(248)) + [UInt8](repeating: 0, count: 248 - min(248, c.localName.count)))

        case Opcode.readLocalVersionInformation:
            var w = ByteWriter()
            w.u8(ControllerVersion.version)
            w.u16(ControllerVersion.subversion)
            w.u8(ControllerVersion.version)
            w.u16(ControllerVersion.company)
            w.u16(ControllerVersion.subversion)
            ok(w.bytes)

        case Opcode.readLocalSupportedCommands:
            ok(supportedCommandsBitmask)

        case Opcode.readLocalSupportedFeatures:
            // Byte 4: bit 5 BR/EDR Not Supported, bit 6 LE Supported (Controller) (Vol 2, Part C, 3.3).
            ok([0, 0, 0, 0, 0x60, 0, 0, 0])

        case Opcode.readBufferSize:
            // An LE-only controller shares its LE buffers; report them here too, and no SCO buffers.
            ok(le16(c.aclBufferLength) + [0] + le16(c.aclBufferCount) + le16(0))

        case Opcode.readBDADDR:
            ok(c.publicAddressBytes.reversed())

        case Opcode.readRSSI:
            guard let handle = r.u16() else { return fail(Status.invalidParameters, [0, 0, 0]) }
            guard let (link, side) = lookup(c, handle) else {
                return fail(Status.unknownConnection, le16(handle) + [0])
            }
            let peer = controllers[link.sides[1 - side].controller]
            ok(le16(handle) + [UInt8(bitPattern: reportedRSSI(from: peer, to: c))])

        case Opcode.leReadBufferSize:
            ok(le16(c.aclBufferLength) + [UInt8(clamping: c.aclBufferCount)])

        case Opcode.leReadBufferSizeV2:
            ok(le16(c.aclBufferLength) + [UInt8(clamping: c.aclBufferCount)] + le16(0) + [0])

        case Opcode.leReadLocalSupportedFeatures:
            var w = ByteWriter()
            w.u64(leLocalFeatures)
            ok(w.bytes)

        case Opcode.leSetRandomAddress:
            guard let bytes = r.bytes(6) else { return fail(Status.invalidParameters) }
            guard !c.advertising, !c.scanning, c.initiating == nil else { return fail(Status.commandDisallowed) }
            c.randomAddress = bytes.reversed()
            ok()

        case Opcode.leSetAdvertisingParameters:
            guard let minI = r.u16(), let maxI = r.u16(), let typeRaw = r.u8(), let own = r.u8(),
                let peerType = r.u8(), let peer = r.bytes(6), let map = r.u8(), let policy = r.u8()
            else { return fail(Status.invalidParameters) }
            guard !c.advertising else { return fail(Status.commandDisallowed) }
            guard let type = LegacyAdvertisingType(rawValue: typeRaw), own <= 3, peerType <= 1,
                map & 0x07 != 0, map <= 0x07, policy <= 3
            else { return fail(Status.invalidParameters) }
            if type != .advDirectIndHighDuty {
                guard minI >= 0x0020, maxI <= 0x4000, minI <= maxI else { return fail(Status.invalidParameters) }
            }
            c.advertisingParameters = AdvertisingParameters(
                intervalMin: minI, intervalMax: maxI, type: type, ownAddressType: own,
                peerAddress: LinkAddress(bytes: peer.reversed(), isRandom: peerType == 1),
                channelMap: map, filterPolicy: policy)
            ok()

        case Opcode.leReadAdvertisingChannelTxPower:
            ok([UInt8(bitPattern: c.txPower)])

        case Opcode.leSetAdvertisingData, Opcode.leSetScanResponseData:
            guard let length = r.u8(), length <= 31, let data = r.bytes(Int(length)) else {
                return fail(Status.invalidParameters)
            }
            if op == Opcode.leSetAdvertisingData { c.advertisingData = data } else { c.scanResponseData = data }
            ok()

        case Opcode.leSetAdvertisingEnable:
            guard let enable = r.u8(), enable <= 1 else { return fail(Status.invalidParameters) }
            if enable == 1 {
                guard c.ownAddress(type: c.advertisingParameters.ownAddressType) != nil else {
                    return fail(Status.invalidParameters)
                }
                ok()
                if !c.advertising { startAdvertising(c) }
            } else {
                ok()
                stopAdvertising(c)
            }

        case Opcode.leSetScanParameters:
            guard let type = r.u8(), let interval = r.u16(), let window = r.u16(), let own = r.u8(),
                let policy = r.u8()
            else { return fail(Status.invalidParameters) }
            guard !c.scanning else { return fail(Status.commandDisallowed) }
            guard type <= 1, (0x0004...0x4000).contains(interval), (0x0004...0x4000).contains(window),
                window <= interval, own <= 3, policy <= 3
            else { return fail(Status.invalidParameters) }
            c.scanParameters = ScanParameters(
                active: type == 1, interval: interval, window: window,
                ownAddressType: own, filterPolicy: policy)
            ok()

        case Opcode.leSetScanEnable:
            guard let enable = r.u8(), let duplicates = r.u8(), enable <= 1, duplicates <= 1 else {
                return fail(Status.invalidParameters)
            }
            if enable == 1 {
                guard c.ownAddress(type: c.scanParameters.ownAddressType) != nil else {
                    return fail(Status.invalidParameters)
                }
                c.filterDuplicates = duplicates == 1
                if !c.scanning {
                    c.scanning = true
                    c.scanStart = now
                    c.seen = []
                }
            } else {
                c.scanning = false
                c.seen = []
            }
            ok()

        case Opcode.leCreateConnection:
            guard let scanInterval = r.u16(), let scanWindow = r.u16(), let policy = r.u8(),
                let peerType = r.u8(), let peer = r.bytes(6), let own = r.u8(), let minI = r.u16(),
                let maxI = r.u16(), let latency = r.u16(), let timeout = r.u16(), r.u16() != nil, r.u16() != nil
            else { return commandStatus(c, op, Status.invalidParameters) }
            guard c.initiating == nil else { return commandStatus(c, op, Status.commandDisallowed) }
            guard (0x0004...0x4000).contains(scanInterval), (0x0004...0x4000).contains(scanWindow),
                scanWindow <= scanInterval, policy <= 1, peerType <= 3, own <= 3,
                validConnectionParameters(min: minI, max: maxI, latency: latency, timeout: timeout),
                c.ownAddress(type: own) != nil
            else { return commandStatus(c, op, Status.invalidParameters) }
            // Vol 4, Part E, 7.8.12 and Vol 1, Part F, 2.9/2.11: a controller at its limit of links answers
            // Connection Limit Exceeded; one already connected to the peer answers Connection Already Exists.
            guard c.linkByHandle.count < c.maximumConnections else {
                return commandStatus(c, op, Status.connectionLimitExceeded)
            }
            if policy == 0, isConnected(c, to: LinkAddress(bytes: peer.reversed(), isRandom: peerType & 1 == 1)) {
                return commandStatus(c, op, Status.connectionAlreadyExists)
            }
            c.initiating = InitiatingParameters(
                scanInterval: scanInterval, scanWindow: scanWindow, useAcceptList: policy == 1,
                peer: LinkAddress(bytes: peer.reversed(), isRandom: peerType & 1 == 1), ownAddressType: own,
                intervalMin: minI, intervalMax: maxI, latency: latency, supervisionTimeout: timeout, start: now)
            commandStatus(c, op, Status.success)

        case Opcode.leCreateConnectionCancel:
            guard c.initiating != nil else { return fail(Status.commandDisallowed) }
            c.initiating = nil
            ok()
            emitConnectionComplete(
                c, status: Status.unknownConnection, handle: 0, role: 0, peer: .none,
                interval: 0, latency: 0, timeout: 0)

        case Opcode.leReadFilterAcceptListSize:
            ok([filterAcceptListSize])

        case Opcode.leClearFilterAcceptList:
            c.acceptList = []
            ok()

        case Opcode.leAddDeviceToFilterAcceptList, Opcode.leRemoveDeviceFromFilterAcceptList:
            guard let type = r.u8(), let address = r.bytes(6), type <= 1 || type == 0xFF else {
                return fail(Status.invalidParameters)
            }
            let entry = LinkAddress(bytes: address.reversed(), isRandom: type == 1)
            if op == Opcode.leAddDeviceToFilterAcceptList {
                guard c.acceptList.count < Int(filterAcceptListSize) || c.acceptList.contains(entry) else {
                    return fail(0x07)  // Memory Capacity Exceeded
                }
                c.acceptList.insert(entry)
            } else {
                c.acceptList.remove(entry)
            }
            ok()

        case Opcode.leConnectionUpdate:
            guard let handle = r.u16(), let minI = r.u16(), let maxI = r.u16(), let latency = r.u16(),
                let timeout = r.u16(), r.u16() != nil, r.u16() != nil
            else { return commandStatus(c, op, Status.invalidParameters) }
            guard let (link, side) = lookup(c, handle) else { return commandStatus(c, op, Status.unknownConnection) }
            guard validConnectionParameters(min: minI, max: maxI, latency: latency, timeout: timeout) else {
                return commandStatus(c, op, Status.invalidParameters)
            }
            guard link.established, link.pendingUpdate == nil, !link.sides[side].awaitingParamReq,
                link.sides[side].terminating == nil
            else { return commandStatus(c, op, Status.commandDisallowed) }
            commandStatus(c, op, Status.success)
            if side == 0 {
                link.sides[0].control.append(
                    .connectionUpdateInd(interval: minI, latency: latency, timeout: timeout, instant: nil))
            } else {
                link.sides[1].awaitingParamReq = true
                link.sides[1].control.append(
                    .connectionParamReq(intervalMin: minI, intervalMax: maxI, latency: latency, timeout: timeout))
            }
            wake(link)

        case Opcode.leRemoteConnectionParameterRequestReply:
            guard let handle = r.u16(), let minI = r.u16(), let maxI = r.u16(), let latency = r.u16(),
                let timeout = r.u16(), r.u16() != nil, r.u16() != nil
            else { return fail(Status.invalidParameters, [0, 0]) }
            guard let (link, side) = lookup(c, handle) else { return fail(Status.unknownConnection, le16(handle)) }
            guard side == 0, link.pendingParamRequestFromPeer else {
                return fail(Status.commandDisallowed, le16(handle))
            }
            guard validConnectionParameters(min: minI, max: maxI, latency: latency, timeout: timeout) else {
                return fail(Status.invalidParameters, le16(handle))
            }
            link.pendingParamRequestFromPeer = false
            ok(le16(handle))
            link.sides[0].control.append(
                .connectionUpdateInd(interval: minI, latency: latency, timeout: timeout, instant: nil))
            wake(link)

        case Opcode.leRemoteConnectionParameterRequestNegativeReply:
            guard let handle = r.u16(), let reason = r.u8() else { return fail(Status.invalidParameters, [0, 0]) }
            guard let (link, side) = lookup(c, handle) else { return fail(Status.unknownConnection, le16(handle)) }
            guard side == 0, link.pendingParamRequestFromPeer else {
                return fail(Status.commandDisallowed, le16(handle))
            }
            link.pendingParamRequestFromPeer = false
            ok(le16(handle))
            link.sides[0].control.append(
                .rejectExtInd(rejectOpcode: LLControlPDU.connectionParamReqOpcode, error: reason))
            wake(link)

        case Opcode.leSetDataLength:
            guard let handle = r.u16(), let octets = r.u16(), let time = r.u16() else {
                return fail(Status.invalidParameters, [0, 0])
            }
            guard let (link, side) = lookup(c, handle) else { return fail(Status.unknownConnection, le16(handle)) }
            guard (0x001B...0x00FB).contains(octets), (0x0148...0x4290).contains(time) else {
                return fail(Status.invalidParameters, le16(handle))
            }
            ok(le16(handle))
            link.sides[side].local.txOctets = Int(octets)
            link.sides[side].local.txTime = Int(time)
            // One Data Length Update procedure at a time per side (Vol 6, Part B, 5.1.9): a request still
            // queued takes the new value instead of a second one being queued behind it.
            let request = LLControlPDU.lengthReq(link.sides[side].local)
            // One already in flight with these values is enough.
            if case .control(.lengthReq(let inFlight))? = link.sides[side].current, inFlight == link.sides[side].local {
                return wake(link)
            }
            if let queued = link.sides[side].control.firstIndex(where: {
                if case .lengthReq = $0 { true } else { false }
            }) {
                link.sides[side].control[queued] = request
            } else {
                link.sides[side].control.append(request)
            }
            wake(link)

        case Opcode.leReadSuggestedDefaultDataLength:
            ok(le16(c.suggestedTxOctets) + le16(c.suggestedTxTime))

        case Opcode.leWriteSuggestedDefaultDataLength:
            guard let octets = r.u16(), let time = r.u16(), (0x001B...0x00FB).contains(octets),
                (0x0148...0x4290).contains(time)
            else { return fail(Status.invalidParameters) }
            c.suggestedTxOctets = Int(octets)
            c.suggestedTxTime = Int(time)
            ok()

        case Opcode.leReadMaximumDataLength:
            // 251 octets, and the time they take on LE Coded (the slowest PHY this controller supports).
            let time = LEPhy.leCoded.maxTime(octets: 251)
            ok(le16(251) + le16(time) + le16(251) + le16(time))

        case Opcode.leReadPHY:
            guard let handle = r.u16() else { return fail(Status.invalidParameters, [0, 0, 0, 0]) }
            guard let (link, side) = lookup(c, handle) else {
                return fail(Status.unknownConnection, le16(handle) + [0, 0])
            }
            ok(le16(handle) + [link.phy(from: side).rawValue, link.phy(from: 1 - side).rawValue])

        case Opcode.leSetDefaultPHY:
            guard let all = r.u8(), let tx = r.u8(), let rx = r.u8(), all <= 3, tx <= 7, rx <= 7 else {
                return fail(Status.invalidParameters)
            }
            if (all & 1 == 0 && tx == 0) || (all & 2 == 0 && rx == 0) { return fail(Status.invalidParameters) }
            c.defaultPhys = (all, tx, rx)
            ok()

        case Opcode.leSetPHY:
            guard let handle = r.u16(), let all = r.u8(), let tx = r.u8(), let rx = r.u8(), r.u16() != nil,
                all <= 3, tx <= 7, rx <= 7
            else { return commandStatus(c, op, Status.invalidParameters) }
            guard let (link, side) = lookup(c, handle) else { return commandStatus(c, op, Status.unknownConnection) }
            guard !link.sides[side].awaitingPhy, link.pendingPhy == nil else {
                return commandStatus(c, op, Status.commandDisallowed)
            }
            commandStatus(c, op, Status.success)
            link.sides[side].preferredTx = all & 1 != 0 ? 0 : tx
            link.sides[side].preferredRx = all & 2 != 0 ? 0 : rx
            link.sides[side].awaitingPhy = true
            link.sides[side].control.append(.phyReq(tx: link.sides[side].preferredTx, rx: link.sides[side].preferredRx))
            wake(link)

        case Opcode.leReadRemoteFeatures:
            guard let handle = r.u16() else { return commandStatus(c, op, Status.invalidParameters) }
            guard let (link, side) = lookup(c, handle) else { return commandStatus(c, op, Status.unknownConnection) }
            guard !link.sides[side].awaitingFeatures else { return commandStatus(c, op, Status.commandDisallowed) }
            commandStatus(c, op, Status.success)
            link.sides[side].awaitingFeatures = true
            link.sides[side].control.append(.featureReq(features: leLocalFeatures))
            wake(link)

        case Opcode.readRemoteVersionInformation:
            guard let handle = r.u16() else { return commandStatus(c, op, Status.invalidParameters) }
            guard let (link, side) = lookup(c, handle) else { return commandStatus(c, op, Status.unknownConnection) }
            guard !link.sides[side].awaitingVersion else { return commandStatus(c, op, Status.commandDisallowed) }
            commandStatus(c, op, Status.success)
            if link.sides[1 - side].sentVersion {
                // The exchange happens once per connection; later requests are answered from what we know.
                emitRemoteVersion(c, handle: handle)
            } else {
                link.sides[side].awaitingVersion = true
                if !link.sides[side].sentVersion {
                    link.sides[side].sentVersion = true
                    link.sides[side].control.append(
                        .versionInd(
                            version: ControllerVersion.version,
                            company: ControllerVersion.company,
                            subversion: ControllerVersion.subversion))
                }
                wake(link)
            }

        case Opcode.leRand:
            var w = ByteWriter()
            w.u64(random.next())
            ok(w.bytes)

        case Opcode.leEncrypt:
            // Vol 4, Part E, 7.8.22: Key and Plaintext_Data, 16 octets each; Encrypted_Data back.
            guard let key = r.bytes(16), let plaintext = r.bytes(16) else { return fail(Status.invalidParameters) }
            ok(LLCrypto.hciEncrypt(key: key, plaintext: plaintext))

        case Opcode.leEnableEncryption:
            // Vol 4, Part E, 7.8.24: the central starts encryption (or refreshes the key); Command Status now,
            // Encryption Change or Encryption Key Refresh Complete when the procedure ends.
            guard let handle = r.u16(), let rand = r.u64(), let ediv = r.u16(), let key = r.bytes(16) else {
                return commandStatus(c, op, Status.invalidParameters)
            }
            guard let (link, side) = lookup(c, handle) else { return commandStatus(c, op, Status.unknownConnection) }
            guard side == 0, link.established, link.sides[0].encryption.step == .idle,
                link.sides[0].terminating == nil
            else { return commandStatus(c, op, Status.commandDisallowed) }
            commandStatus(c, op, Status.success)
            startEncryption(link, rand: rand, ediv: ediv, longTermKey: key)

        case Opcode.leLongTermKeyRequestReply:
            // Vol 4, Part E, 7.8.25: Command Complete with the handle.
            guard let handle = r.u16(), let key = r.bytes(16) else { return fail(Status.invalidParameters, [0, 0]) }
            guard let (link, side) = lookup(c, handle) else { return fail(Status.unknownConnection, le16(handle)) }
            guard side == 1, link.sides[1].encryption.awaitsKey else {
                return fail(Status.commandDisallowed, le16(handle))
            }
            ok(le16(handle))
            longTermKeyReply(link, longTermKey: key)

        case Opcode.leLongTermKeyRequestNegativeReply:
            // Vol 4, Part E, 7.8.26: Command Complete with the handle.
            guard let handle = r.u16() else { return fail(Status.invalidParameters, [0, 0]) }
            guard let (link, side) = lookup(c, handle) else { return fail(Status.unknownConnection, le16(handle)) }
            guard side == 1, link.sides[1].encryption.awaitsKey else {
                return fail(Status.commandDisallowed, le16(handle))
            }
            ok(le16(handle))
            rejectEncryption(link)
            wake(link)

        case Opcode.disconnect:
            guard let handle = r.u16(), let reason = r.u8() else {
                return commandStatus(c, op, Status.invalidParameters)
            }
            guard let (link, side) = lookup(c, handle) else { return commandStatus(c, op, Status.unknownConnection) }
            guard [0x05, 0x13, 0x14, 0x15, 0x1A, 0x29, 0x3B].contains(reason) else {
                return commandStatus(c, op, Status.invalidParameters)
            }
            guard link.sides[side].terminating == nil else { return commandStatus(c, op, Status.commandDisallowed) }
            commandStatus(c, op, Status.success)
            link.sides[side].terminating = reason
            link.sides[side].terminateStart = now
            // LL_TERMINATE_IND goes before anything else this side still has queued.
            link.sides[side].control.prepend(.terminateInd(reason: reason))
            wake(link)

        default:
            fail(Status.unknownCommand)
        }
    }

    func lookup(_ c: ControllerState, _ handle: UInt16) -> (Link, Int)? {
        guard let id = c.linkByHandle[handle & 0x0FFF], let link = links[id], let side = link.side(of: c.index) else {
            return nil
        }
        return (link, side)
    }

    /// Connection parameter ranges (Vol 4, Part E, 7.8.12): interval 6...3200 (1.25 ms), latency ≤ 499,
    /// timeout 10...3200 (10 ms) and longer than `(1 + latency) · interval_max · 2`.
    func validConnectionParameters(min: UInt16, max: UInt16, latency: UInt16, timeout: UInt16) -> Bool {
        guard (0x0006...0x0C80).contains(min), (0x0006...0x0C80).contains(max), min <= max, latency <= 0x01F3,
            (0x000A...0x0C80).contains(timeout)
        else { return false }
        return Int(timeout) * 4 > (1 + Int(latency)) * Int(max)
    }

    /// HCI_Reset: the controller forgets its links (the peers will time out), stops advertising, scanning
    /// and initiating, and restores every default. The local host gets no Disconnection Complete.
    func reset(_ c: ControllerState) {
        leaveAllLinks(c)
        c.resetConfiguration()
    }

    /// Read Remote Version Information Complete (Vol 4, Part E, 7.7.12).
    func emitRemoteVersion(_ c: ControllerState, handle: UInt16) {
        var w = ByteWriter()
        w.u8(0)
        w.u16(handle)
        w.u8(ControllerVersion.version)
        w.u16(ControllerVersion.company)
        w.u16(ControllerVersion.subversion)
        emitEvent(c, code: 0x0C, w.bytes)
    }

    /// LE Connection Complete, or LE Enhanced Connection Complete when the host unmasked it.
    /// - SeeAlso: Core Spec 5.4, Vol 4, Part E, 7.7.65.1 and 7.7.65.10.
    func emitConnectionComplete(
        _ c: ControllerState, status: UInt8, handle: UInt16, role: UInt8, peer: LinkAddress,
        interval: UInt16, latency: UInt16, timeout: UInt16
    ) {
        let enhanced = leEventEnabled(c, subevent: 0x0A)
        var w = ByteWriter(capacity: 32)
        w.u8(status)
        w.u16(handle)
        w.u8(role)
        w.u8(peer.hciType)
        w.append(peer.littleEndian)
        if enhanced {
            w.append([0, 0, 0, 0, 0, 0])  // Local_Resolvable_Private_Address: none
            w.append([0, 0, 0, 0, 0, 0])  // Peer_Resolvable_Private_Address: none
        }
        w.u16(interval)
        w.u16(latency)
        w.u16(timeout)
        w.u8(role == 1 ? 0x05 : 0x00)  // Central_Clock_Accuracy: 50 ppm seen from a peripheral; 0 for a central
        emitLEEvent(c, subevent: enhanced ? 0x0A : 0x01, w.bytes)
    }
}
