import BLECore
import BLEHCI
import BLEHost
import Testing

/// The controller start-up sequence (Core Spec 5.4, Vol 4, Part E, 7; the usual host order), against a
/// scripted controller.
@Suite struct StartupTests {
    @Test func commandSequenceAndControllerInfo() throws {
        let harness = HostHarness()
        let info = try #require(try harness.start()?.get())

        #expect(
            harness.controller.opcodes == [
                .reset, .leSetScanEnable, .leSetAdvertisingEnable,  // a Reset that kept them on (Bumble's) is covered
                .readLocalVersionInformation, .readLocalSupportedCommands, .readBDADDR,
                .setEventMask, .leSetEventMask, .leReadBufferSize, .leReadLocalSupportedFeatures,
                .leWriteSuggestedDefaultDataLength,
            ])
        let profile = harness.controller.profile
        #expect(info.address == profile.address)
        #expect(info.address.type == .publicDevice)
        #expect(info.hciVersion == HCICoreVersion.v5_3.rawValue)
        #expect(info.manufacturer == 0x05F1)
        #expect(info.leBufferLength == 27)
        #expect(info.leBufferCount == 4)
        #expect(info.leFeatures == profile.leFeatures.rawValue)
        #expect(info.supportedCommands == profile.supportedCommands.octets)
        #expect(harness.host.controllerInfo == info)
    }

    @Test func eventMasksAndSuggestedDataLength() throws {
        let harness = HostHarness()
        _ = try #require(try harness.start()?.get())
        let commands = harness.controller.commands

        let mask = try HCISetEventMask(packet: try #require(commands.first { $0.opcode == .setEventMask }))
        #expect(mask.eventMask.contains([.disconnectionComplete, .encryptionChange, .leMeta]))
        let leMask = try HCILESetEventMask(packet: try #require(commands.first { $0.opcode == .leSetEventMask }))
        #expect(
            leMask.leEventMask.contains([
                .connectionComplete, .advertisingReport, .connectionUpdateComplete,
                .dataLengthChange, .longTermKeyRequest,
            ]))

        let suggested = try HCILEWriteSuggestedDefaultDataLength(
            packet: try #require(commands.first { $0.opcode == .leWriteSuggestedDefaultDataLength }))
        #expect(suggested.suggestedMaxTxOctets == 251)
        #expect(suggested.suggestedMaxTxTime == (251 + 14) * 8)  // 1M PHY, Vol 6, Part B, 4.5.10
    }

    @Test func zeroPublicAddressGetsARandomStaticAddress() throws {
        var profile = ControllerProfile()
        profile.address = .zero
        let harness = HostHarness(profile: profile)
        let info = try #require(try harness.start()?.get())

        #expect(
            harness.controller.opcodes == [
                .reset, .leSetScanEnable, .leSetAdvertisingEnable,  // a Reset that kept them on (Bumble's) is covered
                .readLocalVersionInformation, .readLocalSupportedCommands, .readBDADDR,
                .setEventMask, .leSetEventMask, .leReadBufferSize, .leReadLocalSupportedFeatures,
                .leSetRandomAddress, .leWriteSuggestedDefaultDataLength,
            ])
        let set = try HCILESetRandomAddress(
            packet: try #require(harness.controller.commands.first { $0.opcode == .leSetRandomAddress }))
        #expect(set.randomAddress.bytes == info.address.bytes)
        #expect(info.address.type == .randomDevice)
        #expect(info.address.bytes[0] & 0xC0 == 0xC0)  // static: two top bits set (Vol 6, Part B, 1.3.2.1)
        #expect(info.address.bytes != [0, 0, 0, 0, 0, 0])
        // The host's seed (0x5EED unless configured) fixes it: one byte from each of six LinearCongruential draws.
        #expect(info.address.bytes == [0xC6, 0x4F, 0x14, 0xAF, 0xD8, 0x4B])
    }

    @Test func suggestedDataLengthOnlyWhenSupported() throws {
        var profile = ControllerProfile()
        profile.supportedCommands = HCISupportedCommands(
            supporting: HCISupportedCommands.knownOpcodes.filter { $0 != .leWriteSuggestedDefaultDataLength })
        let harness = HostHarness(profile: profile)
        _ = try #require(try harness.start()?.get())
        #expect(!harness.controller.opcodes.contains(.leWriteSuggestedDefaultDataLength))
        #expect(harness.controller.opcodes.last == .leReadLocalSupportedFeatures)
    }

    @Test func leBufferSizeZeroFallsBackToReadBufferSize() throws {
        var profile = ControllerProfile()
        profile.leBufferLength = 0
        profile.leBufferCount = 0
        profile.aclBufferLength = 310
        profile.aclBufferCount = 5
        let harness = HostHarness(profile: profile)
        let info = try #require(try harness.start()?.get())

        let opcodes = harness.controller.opcodes
        let le = try #require(opcodes.firstIndex(of: .leReadBufferSize))
        #expect(opcodes[le + 1] == .readBufferSize)
        #expect(info.leBufferLength == 310)
        #expect(info.leBufferCount == 5)
    }

    @Test func nonZeroLEBufferSizeSkipsReadBufferSize() throws {
        let harness = HostHarness()
        _ = try #require(try harness.start()?.get())
        #expect(!harness.controller.opcodes.contains(.readBufferSize))
    }

    @Test(arguments: [HCIOpcode.reset, .setEventMask, .leSetEventMask, .leReadBufferSize])
    func failingMandatoryCommandFailsStart(_ opcode: HCIOpcode) throws {
        let harness = HostHarness()
        harness.controller.answer(opcode, with: .completeFailure(.hardwareFailure))
        let outcome = try #require(harness.start())
        guard case .failure(let error) = outcome else {
            Issue.record("start succeeded although \(opcode) failed")
            return
        }
        #expect(error.code == .hci(.hardwareFailure))
        #expect(error.message.contains("initialisation"))
        #expect(harness.controller.opcodes.last == opcode)  // nothing after the failure
        #expect(harness.host.controllerInfo == nil)
    }

    @Test func unansweredResetTimesOut() throws {
        let harness = HostHarness()
        harness.controller.answer(.reset, with: .silent)
        let outcome = Outcome<Result<ControllerInfo, HostError>>()
        harness.host.start(outcome.handler)
        harness.controller.pump()
        #expect(outcome.value == nil)

        // The first initialisation waits longer than a command does (a controller just opened may be slow).
        let timeout = harness.host.configuration.startupCommandTimeout
        #expect(timeout > harness.host.configuration.commandTimeout)
        harness.scheduler.advance(by: timeout - .milliseconds(1))
        #expect(outcome.value == nil)
        harness.scheduler.advance(by: .milliseconds(1))
        guard case .failure(let error) = try #require(outcome.value) else {
            Issue.record("start succeeded without a Reset answer")
            return
        }
        #expect(error.code == .commandTimeout)
        #expect(error.message.contains("initialisation"))
        #expect(error.message.contains("within 10.0 seconds"), "\(error.message)")
    }

    @Test func optionalCommandsMayFail() throws {
        let harness = HostHarness()
        harness.controller.answer(.readLocalVersionInformation, with: .completeFailure(.unknownCommand))
        harness.controller.answer(.leReadLocalSupportedFeatures, with: .completeFailure(.unknownCommand))
        let info = try #require(try harness.start()?.get())
        #expect(info.hciVersion == 0)
        #expect(info.leFeatures == 0)
        #expect(info.leBufferCount == 4)
    }

    @Test func scanningAndAdvertisingAreDisabledAfterResetWhateverTheAnswer() throws {
        let harness = HostHarness()
        harness.controller.answer(.leSetScanEnable, with: .completeFailure(.commandDisallowed))
        harness.controller.answer(.leSetAdvertisingEnable, with: .completeFailure(.commandDisallowed))
        let info = try #require(try harness.start()?.get())
        #expect(info.address == harness.controller.profile.address)
        #expect(Array(harness.controller.opcodes.prefix(3)) == [.reset, .leSetScanEnable, .leSetAdvertisingEnable])
        let disable = try HCILESetScanEnable(packet: harness.controller.commands[1])
        #expect(disable.enable == false)
    }
}
