import BLECore
import BLEHCI
import BLEVirtualController
import Foundation
import Testing

/// Link encryption between two virtual controllers, as their hosts see it over HCI and as a sniffer sees it on
/// the air (Core Spec 5.4, Vol 6, Part B, 5.1.3; Vol 4, Part E, 7.8.24-7.8.26, 7.7.8, 7.7.39, 7.7.65.5).
@Suite struct EncryptionTests {
    static let key = [UInt8](0x10...0x1F)
    static let otherKey = [UInt8](0x20...0x2F)
    static let rand: UInt64 = 0x0807_0605_0403_0201
    static let ediv: UInt16 = 0xBEEF

    /// LE Enable Encryption's parameters: handle, Rand, EDIV, LTK.
    static func enable(_ handle: UInt16, key: [UInt8] = key) -> [UInt8] {
        var p = le16(handle)
        for i in 0..<8 { p.append(UInt8(truncatingIfNeeded: rand >> (8 * UInt64(i)))) }
        return p + le16(ediv) + key
    }

    /// Encryption Change events as (status, handle, enabled).
    static func encryptionChanges(_ host: TestHost) -> [[UInt8]] { host.events(code: 0x08).map(\.parameters) }

    /// Starts encryption from the central, answers the peripheral's key request with `peripheralKey` (or no key),
    /// and runs the radio until both sides are done.
    static func encrypt(_ pair: ConnectedPair, centralKey: [UInt8] = key, peripheralKey: [UInt8]?) async throws {
        #expect(try await pair.central.command(0x2019, enable(pair.centralHandle, key: centralKey)) == [0])
        try await pair.radio.run(for: .milliseconds(200))
        if let peripheralKey {
            #expect(
                try await pair.peripheral.command(0x201A, le16(pair.peripheralHandle) + peripheralKey)
                    == [0] + le16(pair.peripheralHandle))
        } else {
            #expect(
                try await pair.peripheral.command(0x201B, le16(pair.peripheralHandle))
                    == [0] + le16(pair.peripheralHandle))
        }
        try await pair.radio.run(for: .milliseconds(300))
    }

    @Test func centralStartsWithTheKeyThePeripheralsHostSupplies() async throws {
        let pair = try await ConnectedPair.make()
        #expect(try await pair.central.command(0x2019, Self.enable(pair.centralHandle)) == [0])
        // Data the central's host hands over meanwhile waits for the procedure to end.
        let early: [UInt8] = [0x05, 0x00, 0x04, 0x00, 0x0A, 0x01, 0x00, 0xAA, 0xBB]
        pair.central.sendACL(handle: pair.centralHandle, early)
        try await pair.radio.run(for: .milliseconds(200))
        // The peripheral's host is asked for the key with the Rand and EDIV the central's host gave.
        let request = pair.peripheral.leEvents(0x05).map(\.parameters)
        var expected = le16(pair.peripheralHandle)
        for i in 0..<8 { expected.append(UInt8(truncatingIfNeeded: Self.rand >> (8 * UInt64(i)))) }
        #expect(request == [expected + le16(Self.ediv)])
        #expect(pair.peripheral.acl.isEmpty, "data went out during the encryption procedure")
        #expect(Self.encryptionChanges(pair.central).isEmpty)

        #expect(
            try await pair.peripheral.command(0x201A, le16(pair.peripheralHandle) + Self.key)
                == [0] + le16(pair.peripheralHandle))
        try await pair.radio.run(for: .milliseconds(300))
        #expect(Self.encryptionChanges(pair.central) == [[0] + le16(pair.centralHandle) + [1]])
        #expect(Self.encryptionChanges(pair.peripheral) == [[0] + le16(pair.peripheralHandle) + [1]])
        // The held data went after the procedure, intact, and the peripheral's host heard of the encryption first.
        #expect(pair.peripheral.acl.map(\.data) == [early])
        if let change = pair.peripheral.events(code: 0x08).first, let data = pair.peripheral.acl.first {
            #expect(change.time <= data.time)
        }

        // Both ways, a payload of several PDUs arrives intact over the encrypted link.
        let down = (0..<300).map { UInt8(truncatingIfNeeded: $0 &* 7) }
        let up = (0..<60).map { UInt8(truncatingIfNeeded: $0 &+ 100) }
        pair.central.sendACL(handle: pair.centralHandle, [0x2C, 0x01, 0x40, 0x00] + down.prefix(196))
        pair.central.sendACL(handle: pair.centralHandle, boundary: 0b01, Array(down.dropFirst(196)))
        pair.peripheral.sendACL(handle: pair.peripheralHandle, [0x3C, 0x00, 0x40, 0x00] + up)
        try await pair.radio.run(for: .milliseconds(500))
        #expect(
            pair.peripheral.acl.dropFirst().reduce([]) { $0 + $1.data } == [0x2C, 0x01, 0x40, 0x00] + down)
        #expect(pair.central.acl.reduce([]) { $0 + $1.data } == [0x3C, 0x00, 0x40, 0x00] + up)
        #expect(pair.central.events(code: 0x05).isEmpty && pair.peripheral.events(code: 0x05).isEmpty)
    }

    /// A peripheral whose host has no key rejects LL_ENC_REQ with PIN or Key Missing: the central's host hears an
    /// Encryption Change with that status and encryption off; the link stays up and carries data in the clear.
    @Test func negativeReplyLeavesTheLinkUpAndUnencrypted() async throws {
        let pair = try await ConnectedPair.make()
        try await Self.encrypt(pair, peripheralKey: nil)
        #expect(Self.encryptionChanges(pair.central) == [[0x06] + le16(pair.centralHandle) + [0]])
        #expect(Self.encryptionChanges(pair.peripheral).isEmpty)
        let frame: [UInt8] = [0x03, 0x00, 0x04, 0x00, 0x0A, 0x01, 0x00]
        pair.central.sendACL(handle: pair.centralHandle, frame)
        pair.peripheral.sendACL(handle: pair.peripheralHandle, frame)
        try await pair.radio.run(for: .seconds(2))
        #expect(pair.peripheral.acl.map(\.data) == [frame])
        #expect(pair.central.acl.map(\.data) == [frame])
        #expect(pair.central.events(code: 0x05).isEmpty && pair.peripheral.events(code: 0x05).isEmpty)
        // And the central may try again.
        try await Self.encrypt(pair, peripheralKey: Self.key)
        #expect(Self.encryptionChanges(pair.central).last == [0] + le16(pair.centralHandle) + [1])
    }

    /// Keys that differ give different session keys: the peripheral cannot check the MIC of the central's first
    /// encrypted PDU (LL_START_ENC_RSP) and leaves the link at once with Connection Terminated due to MIC Failure.
    /// As on real silicon, it leaves without a word: the central, which hears nothing more, reports Connection
    /// Timeout when the supervision timeout (1 s here) runs out. Neither host hears of encryption.
    @Test func mismatchedKeysEndTheLinkWithAMICFailure() async throws {
        let pair = try await ConnectedPair.make()
        #expect(try await pair.central.command(0x2019, Self.enable(pair.centralHandle)) == [0])
        try await pair.radio.run(for: .milliseconds(200))
        #expect(
            try await pair.peripheral.command(0x201A, le16(pair.peripheralHandle) + Self.otherKey)
                == [0] + le16(pair.peripheralHandle))
        let replied = pair.radio.now
        try await pair.radio.run(for: .milliseconds(300))
        let peripheralEnd = pair.peripheral.events(code: 0x05)
        #expect(peripheralEnd.map(\.parameters) == [[0] + le16(pair.peripheralHandle) + [0x3D]])
        #expect(pair.central.events(code: 0x05).isEmpty)
        try await pair.radio.run(for: .seconds(2))
        let centralEnd = pair.central.events(code: 0x05)
        #expect(centralEnd.map(\.parameters) == [[0] + le16(pair.centralHandle) + [0x08]])
        if let p = peripheralEnd.first, let c = centralEnd.first {
            #expect(p.time - replied < .milliseconds(200))
            #expect(c.time - p.time >= .seconds(1))
        }
        #expect(Self.encryptionChanges(pair.central).isEmpty && Self.encryptionChanges(pair.peripheral).isEmpty)
    }

    /// LE Enable Encryption on an encrypted link pauses encryption and starts it again with the new key: the
    /// peripheral's host is asked again, and both hosts hear Encryption Key Refresh Complete, not a second
    /// Encryption Change. Data flows before and after.
    @Test func keyRefreshOnAnEncryptedLink() async throws {
        let pair = try await ConnectedPair.make()
        try await Self.encrypt(pair, peripheralKey: Self.key)
        pair.central.sendACL(handle: pair.centralHandle, [0x01, 0x00, 0x40, 0x00, 0x01])
        try await pair.radio.run(for: .milliseconds(200))
        try await Self.encrypt(pair, centralKey: Self.otherKey, peripheralKey: Self.otherKey)
        #expect(pair.peripheral.leEvents(0x05).count == 2)
        #expect(pair.central.events(code: 0x30).map(\.parameters) == [[0] + le16(pair.centralHandle)])
        #expect(pair.peripheral.events(code: 0x30).map(\.parameters) == [[0] + le16(pair.peripheralHandle)])
        #expect(Self.encryptionChanges(pair.central).count == 1 && Self.encryptionChanges(pair.peripheral).count == 1)
        pair.central.sendACL(handle: pair.centralHandle, [0x01, 0x00, 0x40, 0x00, 0x02])
        pair.peripheral.sendACL(handle: pair.peripheralHandle, [0x01, 0x00, 0x40, 0x00, 0x03])
        try await pair.radio.run(for: .milliseconds(300))
        #expect(pair.peripheral.acl.map(\.data) == [[0x01, 0x00, 0x40, 0x00, 0x01], [0x01, 0x00, 0x40, 0x00, 0x02]])
        #expect(pair.central.acl.map(\.data) == [[0x01, 0x00, 0x40, 0x00, 0x03]])
        #expect(pair.central.events(code: 0x05).isEmpty && pair.peripheral.events(code: 0x05).isEmpty)
    }

    /// Lost packets and their retransmissions keep the packet counters of both sides in step: every PDU is sealed
    /// once, resent as it was, and opened once.
    @Test func encryptionSurvivesPacketLoss() async throws {
        let pair = try await ConnectedPair.make(seed: 5)
        pair.radio.packetLossRate = 0.2
        try await Self.encrypt(pair, peripheralKey: Self.key)
        try await pair.radio.run(for: .seconds(1))
        #expect(Self.encryptionChanges(pair.central) == [[0] + le16(pair.centralHandle) + [1]])
        let payload = (0..<150).map { UInt8(truncatingIfNeeded: $0) }
        for _ in 0..<3 {
            pair.central.sendACL(handle: pair.centralHandle, [0x96, 0x00, 0x40, 0x00] + payload)
            pair.peripheral.sendACL(handle: pair.peripheralHandle, [0x96, 0x00, 0x40, 0x00] + payload)
        }
        try await pair.radio.run(for: .seconds(3))
        #expect(
            pair.peripheral.acl.reduce([]) { $0 + $1.data }
                == Array(repeating: [0x96, 0x00, 0x40, 0x00] + payload, count: 3).flatMap { $0 })
        #expect(
            pair.central.acl.reduce([]) { $0 + $1.data }
                == Array(repeating: [0x96, 0x00, 0x40, 0x00] + payload, count: 3).flatMap { $0 })
        #expect(pair.central.events(code: 0x05).isEmpty && pair.peripheral.events(code: 0x05).isEmpty)
    }

    /// A peripheral whose host masked LE Long Term Key Request cannot be asked for a key: its controller answers as
    /// if the host had none.
    @Test func aMaskedKeyRequestIsAMissingKey() async throws {
        let pair = try await ConnectedPair.make()
        #expect(try await pair.peripheral.command(0x2001, [0xEF, 0xFD, 0, 0, 0, 0, 0, 0]) == [0])
        #expect(try await pair.central.command(0x2019, Self.enable(pair.centralHandle)) == [0])
        try await pair.radio.run(for: .milliseconds(300))
        #expect(pair.peripheral.leEvents(0x05).isEmpty)
        #expect(Self.encryptionChanges(pair.central) == [[0x06] + le16(pair.centralHandle) + [0]])
    }

    /// What each role may not do, and what a busy procedure refuses.
    @Test func commandsOutOfTurnAreRefused() async throws {
        let pair = try await ConnectedPair.make()
        // Only a central starts encryption.
        #expect(try await pair.peripheral.command(0x2019, Self.enable(pair.peripheralHandle)) == [0x0C])
        #expect(try await pair.central.command(0x2019, Self.enable(0x0ABC)) == [0x02])
        #expect(try await pair.central.command(0x2019, le16(pair.centralHandle)) == [0x12])
        // No key was asked for.
        #expect(
            try await pair.peripheral.command(0x201A, le16(pair.peripheralHandle) + Self.key)
                == [0x0C] + le16(pair.peripheralHandle))
        #expect(
            try await pair.peripheral.command(0x201B, le16(pair.peripheralHandle))
                == [0x0C] + le16(pair.peripheralHandle))
        #expect(try await pair.central.command(0x201B, le16(pair.centralHandle)) == [0x0C] + le16(pair.centralHandle))
        // One procedure at a time.
        #expect(try await pair.central.command(0x2019, Self.enable(pair.centralHandle)) == [0])
        #expect(try await pair.central.command(0x2019, Self.enable(pair.centralHandle)) == [0x0C])
    }

    /// HCI_LE_Encrypt computes e on the controller: the sample of Vol 6, Part C, 1.1.
    @Test func leEncryptCommand() async throws {
        let radio = SimulatedRadio(seed: 1)
        let host = TestHost(radio.addController(name: "a"))
        let key: [UInt8] = [
            0xBF, 0x01, 0xFB, 0x9D, 0x4E, 0xF3, 0xBC, 0x36, 0xD8, 0x74, 0xF5, 0x39, 0x41, 0x38, 0x68, 0x4C,
        ]
        let plaintext: [UInt8] = [
            0x13, 0x02, 0xF1, 0xE0, 0xDF, 0xCE, 0xBD, 0xAC, 0x79, 0x68, 0x57, 0x46, 0x35, 0x24, 0x13, 0x02,
        ]
        #expect(
            try await host.command(0x2017, key + plaintext) == [
                0, 0x66, 0xC6, 0xC2, 0x27, 0x8E, 0x3B, 0x8E, 0x05, 0x3E, 0x7E, 0xA3, 0x26, 0x52, 0x1B, 0xAD, 0x99,
            ])
        #expect(try await host.command(0x2017, key) == [0x12])
    }

    // MARK: On the air

    /// One record of an air capture: its start, pseudo-header flags and PDU.
    struct Record {
        var time: Int64
        var flags: UInt16
        var pdu: [UInt8]
        var isData: Bool
        var fromCentral: Bool { (flags >> 7) & 0b111 == 2 }
        var llid: UInt8 { pdu[0] & 0b11 }
        var length: Int { Int(pdu[1]) }
        var payload: [UInt8] { Array(pdu.dropFirst(2)) }
    }

    static func records(_ path: String) throws -> [Record] {
        let bytes = [UInt8](try Data(contentsOf: URL(fileURLWithPath: path)))
        func u32(_ at: Int) -> UInt32 { (0..<4).reduce(0) { $0 | UInt32(bytes[at + $1]) << (8 * $1) } }
        var records: [Record] = []
        var at = 24
        while at + 16 <= bytes.count {
            let time = Int64(u32(at)) * 1_000_000_000 + Int64(u32(at + 4))
            let length = Int(u32(at + 8))
            let body = Array(bytes[(at + 16)..<(at + 16 + length)])
            let accessAddress = body[10..<14].reversed().reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
            records.append(
                Record(
                    time: time, flags: UInt16(body[8]) | UInt16(body[9]) << 8, pdu: Array(body[14..<(body.count - 3)]),
                    isData: accessAddress != 0x8E89_BED6))
            at += 16 + length
        }
        return records
    }

    /// The data-channel and advertising records of a capture of `scenario`, run on a fresh pair.
    static func captured(_ scenario: (ConnectedPair) async throws -> Void) async throws -> [Record] {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("enc-\(UUID().uuidString).pcap").path
        defer { try? FileManager.default.removeItem(atPath: path) }
        let radio = SimulatedRadio(seed: 11)
        try radio.startAirCapture(to: path)
        let pair = try await ConnectedPair.make(radio: radio)
        try await scenario(pair)
        radio.stopAirCapture()
        return try records(path)
    }

    /// A pair whose link is captured from the start, encrypted or not, that sends one 100-octet PDU from the
    /// central; the records of the capture.
    static func capturedTransfer(encrypted: Bool, peripheralKey: [UInt8] = key) async throws -> [Record] {
        try await captured { pair in
            // Longer PDUs both ways.
            for (host, handle) in [(pair.central, pair.centralHandle), (pair.peripheral, pair.peripheralHandle)] {
                #expect(try await host.command(0x2022, le16(handle) + le16(251) + le16(2120)) == [0] + le16(handle))
            }
            try await pair.radio.run(for: .milliseconds(200))
            if encrypted { try await encrypt(pair, peripheralKey: peripheralKey) }
            pair.central.sendACL(
                handle: pair.centralHandle, [0x60, 0x00, 0x40, 0x00] + [UInt8](repeating: 0xA5, count: 96))
            try await pair.radio.run(for: .milliseconds(300))
        }
    }

    /// An encrypted PDU is 4 octets longer on the air (its MIC): on LE 1M, the peripheral's answer starts
    /// 4 × 8 µs later after a 100-octet PDU than on a link in the clear.
    @Test func anEncryptedPacketTakesTheMICsAirTimeMore() async throws {
        func answerDelay(_ records: [Record]) -> Int64? {
            guard let i = records.firstIndex(where: { $0.isData && $0.fromCentral && $0.llid == 0b10 }),
                let answer = records[(i + 1)...].first(where: { $0.isData && !$0.fromCentral })
            else { return nil }
            return answer.time - records[i].time
        }
        let clear = try await Self.capturedTransfer(encrypted: false)
        let encrypted = try await Self.capturedTransfer(encrypted: true)
        // T(PDU) + T_IFS: 8 µs × (1 + 4 + 2 + 100 + 3) + 150 µs in the clear, and 4 octets more encrypted.
        let clearDelay = try #require(answerDelay(clear))
        let encryptedDelay = try #require(answerDelay(encrypted))
        #expect(clearDelay == Int64(8 * 110 + 150) * 1_000)
        #expect(encryptedDelay == Int64(8 * 114 + 150) * 1_000)
        #expect(encryptedDelay - clearDelay == 4 * 8 * 1_000)
    }

    /// The capture shows an encrypted PDU as a sniffer that knows the key does: its payload decrypted, the MIC
    /// after it (the length field counting it), and the "decrypted", "MIC checked" and "MIC valid" flags, with the
    /// CRC checked and valid. The procedure's own PDUs appear in order, LL_START_ENC_REQ in the clear.
    @Test func theCaptureShowsEncryptedPDUsDecrypted() async throws {
        let records = try await Self.capturedTransfer(encrypted: true).filter(\.isData)
        let decrypted: UInt16 = 0x0008
        let micChecked: UInt16 = 0x1000
        let micValid: UInt16 = 0x2000
        let crcCheckedAndValid: UInt16 = 0x0C00
        let control = records.filter { $0.llid == 0b11 && $0.length > 0 }
        let opcodes = control.map { $0.payload[0] }
        // LL_ENC_REQ, LL_ENC_RSP, LL_START_ENC_REQ, LL_START_ENC_RSP twice, in that order (after the data length
        // update's PDUs).
        let procedure = opcodes.filter { (0x03...0x06).contains($0) }
        #expect(procedure == [0x03, 0x04, 0x05, 0x06, 0x06])
        for record in control where (0x03...0x05).contains(record.payload[0]) {
            #expect(record.flags & (decrypted | micChecked | micValid) == 0)
        }
        let responses = control.filter { $0.payload[0] == 0x06 }
        #expect(responses.map(\.fromCentral) == [true, false])
        for record in responses {
            #expect(record.length == 1 + 4 && record.pdu.count == 2 + 5)
            #expect(record.flags & (decrypted | micChecked | micValid | crcCheckedAndValid) == 0x3C08)
        }
        let data = records.filter { $0.llid == 0b10 && $0.fromCentral }
        #expect(data.count == 1)
        if let record = data.first {
            #expect(record.length == 100 + 4)
            #expect(
                Array(record.payload.prefix(100)) == [0x60, 0x00, 0x40, 0x00] + [UInt8](repeating: 0xA5, count: 96))
            #expect(record.flags & (decrypted | micChecked | micValid | crcCheckedAndValid) == 0x3C08)
        }
        // Empty PDUs are never encrypted.
        for record in records where record.length == 0 { #expect(record.flags & micChecked == 0) }
    }

    /// With different keys, the sniffer (following the receiver) cannot check the central's LL_START_ENC_RSP: it
    /// is recorded as sent, "MIC checked" but not valid, not decrypted.
    @Test func theCaptureShowsAFailedMIC() async throws {
        let records = try await Self.capturedTransfer(encrypted: true, peripheralKey: Self.otherKey).filter(\.isData)
        let sealed = records.filter { $0.flags & 0x1000 != 0 }
        #expect(sealed.count >= 1)
        if let first = sealed.first {
            #expect(first.fromCentral && first.llid == 0b11 && first.length == 5)
            #expect(first.flags & 0x2008 == 0)
        }
    }

    /// The peripheral rejects LL_ENC_REQ with LL_REJECT_EXT_IND when a feature exchange showed that the central
    /// takes it, and with LL_REJECT_IND otherwise; either way with PIN or Key Missing, and either way the central's
    /// host hears Encryption Change with that status (Vol 6, Part B, 5.1.3.1).
    @Test func theRejectFitsWhatTheCentralTakes() async throws {
        for exchangeFeatures in [false, true] {
            let records = try await Self.captured { pair in
                if exchangeFeatures {
                    #expect(try await pair.central.command(0x2016, le16(pair.centralHandle)) == [0])
                    try await pair.radio.run(for: .milliseconds(200))
                }
                try await Self.encrypt(pair, peripheralKey: nil)
                #expect(Self.encryptionChanges(pair.central) == [[0x06] + le16(pair.centralHandle) + [0]])
            }
            let rejects = records.filter { $0.isData && $0.llid == 0b11 && [0x0D, 0x11].contains($0.payload.first) }
            #expect(rejects.map(\.payload) == [exchangeFeatures ? [0x11, 0x03, 0x06] : [0x0D, 0x06]])
            #expect(rejects.allSatisfy { !$0.fromCentral && $0.flags & 0x1000 == 0 })
        }
    }

    /// A key refresh on the air: LL_PAUSE_ENC_REQ and the peripheral's LL_PAUSE_ENC_RSP under the old key, the
    /// central's LL_PAUSE_ENC_RSP in the clear, then the start procedure again (Vol 6, Part B, 5.1.3.2).
    @Test func theCaptureShowsAKeyRefresh() async throws {
        let records = try await Self.captured { pair in
            try await Self.encrypt(pair, peripheralKey: Self.key)
            try await Self.encrypt(pair, centralKey: Self.otherKey, peripheralKey: Self.otherKey)
            #expect(pair.central.events(code: 0x30).count == 1)
        }
        let procedure = records.filter { $0.isData && $0.llid == 0b11 && $0.length > 0 }
            .map { ($0.payload[0], $0.fromCentral, $0.flags & 0x3008 == 0x3008) }
            .filter { [0x03, 0x04, 0x05, 0x06, 0x0A, 0x0B].contains($0.0) }
        let expected: [(UInt8, Bool, Bool)] = [
            (0x03, true, false), (0x04, false, false), (0x05, false, false), (0x06, true, true), (0x06, false, true),
            (0x0A, true, true), (0x0B, false, true), (0x0B, true, false),
            (0x03, true, false), (0x04, false, false), (0x05, false, false), (0x06, true, true), (0x06, false, true),
        ]
        #expect(procedure.map(\.0) == expected.map(\.0))
        #expect(procedure.map(\.1) == expected.map(\.1))
        #expect(procedure.map(\.2) == expected.map(\.2))
    }
}
