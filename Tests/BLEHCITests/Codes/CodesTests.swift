import BLECore
import BLEHCI
import NIOCore
import Testing

@Suite struct CodesTests {
    @Test func opcodeGroupsAndCommands() {
        #expect(HCIOpcode(ogf: 0x08, ocf: 0x000D) == .leCreateConnection)
        #expect(HCIOpcode.leCreateConnection.rawValue == 0x200D)
        #expect(HCIOpcode.reset.ogf == 0x03)
        #expect(HCIOpcode.reset.ocf == 0x0003)
        #expect(HCIOpcode.disconnect.ogf == 0x01)
        #expect(HCIOpcode.readRSSI.ogf == 0x05)
        #expect(HCIOpcode.readBDADDR == HCIOpcode(ogf: 0x04, ocf: 0x0009))
        let vendor = HCIOpcode(rawValue: 0xFC01)
        #expect(vendor.ogf == 0x3F && vendor.ocf == 0x001)
        #expect(vendor.name == nil)
    }

    @Test func opcodeDescriptionsUseSpecNames() {
        #expect(HCIOpcode.leSetScanEnable.description == "HCI_LE_Set_Scan_Enable (0x200C)")
        #expect(HCIOpcode(rawValue: 0xFC01).description == "0xFC01 (OGF 0x3F, OCF 0x0001)")
    }

    @Test func everyStandardCommandHasANamedOpcodeAndASupportedCommandsBit() {
        for type in HCICommandRegistry.allStandardCommandTypes {
            #expect(type.opcode.name != nil, "\(type)")
            if type.opcode != .readLocalSupportedCommands {
                #expect(HCISupportedCommands.bitPosition(of: type.opcode) != nil, "\(type)")
            }
        }
    }

    @Test func statusCodes() {
        #expect(HCIStatus.success.rawValue == 0x00)
        #expect(HCIStatus.unknownCommand.rawValue == 0x01)
        #expect(HCIStatus.unknownConnectionIdentifier.rawValue == 0x02)
        #expect(HCIStatus.connectionTimeout.rawValue == 0x08)
        #expect(HCIStatus.commandDisallowed.rawValue == 0x0C)
        #expect(HCIStatus.invalidHCICommandParameters.rawValue == 0x12)
        #expect(HCIStatus.remoteUserTerminatedConnection.rawValue == 0x13)
        #expect(HCIStatus.connectionTerminatedByLocalHost.rawValue == 0x16)
        #expect(HCIStatus.unsupportedRemoteFeature.rawValue == 0x1A)
        #expect(HCIStatus.unacceptableConnectionParameters.rawValue == 0x3B)
        #expect(HCIStatus.connectionFailedToBeEstablished.rawValue == 0x3E)
        #expect(HCIStatus.unknownAdvertisingIdentifier.rawValue == 0x42)
        #expect(HCIStatus.operationCancelledByHost.rawValue == 0x44)
        #expect(HCIStatus.success.isSuccess && !HCIStatus.connectionTimeout.isSuccess)
        #expect(HCIStatus.remoteUserTerminatedConnection.description == "Remote User Terminated Connection (0x13)")
        #expect(HCIStatus(0x99).description == "0x99")
    }

    @Test func eventCodes() {
        #expect(HCIEventCode.commandComplete.rawValue == 0x0E)
        #expect(HCIEventCode.leMeta.description == "LE Meta (0x3E)")
        #expect(HCIEventCode(rawValue: 0xF0).description == "0xF0")
        #expect(HCILEMetaSubevent.phyUpdateComplete.rawValue == 0x0C)
    }

    @Test func supportedCommandsTable() {
        var mask = HCISupportedCommands()
        #expect(!mask.supports(.reset))
        #expect(mask.supports(.readLocalSupportedCommands))
        mask.insert(.reset)
        mask.insert(.leReadBufferSizeV2)
        #expect(mask.octets[5] == 0x80)
        #expect(mask.octets[41] == 0x20)
        #expect(mask.supports(.reset) && mask.supports(.leReadBufferSizeV2))
        #expect(!mask.supports(.leSetPHY))
        let inserted = mask.insert(HCIOpcode(rawValue: 0xFC01))
        #expect(!inserted)
        let all = HCISupportedCommands(supporting: HCISupportedCommands.knownOpcodes)
        for opcode in HCISupportedCommands.knownOpcodes { #expect(all.supports(opcode)) }
        #expect(HCISupportedCommands(octets: [0x20]).supports(.disconnect))
        #expect(HCISupportedCommands(octets: [0x20]).octets.count == 64)
    }

    @Test func masks() {
        #expect(HCIEventMask.leMeta.rawValue == 1 << 61)
        #expect(HCIEventMask.disconnectionComplete.rawValue == 1 << 4)
        #expect(HCILEEventMask(subevent: .connectionComplete) == .connectionComplete)
        #expect(HCILEEventMask(subevent: .phyUpdateComplete) == .phyUpdateComplete)
        #expect(HCILEEventMask.controllerDefault.contains(.longTermKeyRequest))
        #expect(!HCILEEventMask.controllerDefault.contains(.dataLengthChange))
        #expect(LEFeatures.le2MPHY.rawValue == 0x100)
        #expect(LEFeatures.extendedAdvertising.rawValue == 1 << 12)
        #expect(HCIAdvertisingChannelMap.all.rawValue == 0x07)
        #expect(LEFeatures([.leEncryption, .lePing]).description == "[leEncryption, lePing]")
        #expect(LEFeatures(rawValue: 1 << 63).description == "[0x8000000000000000]")
    }

    @Test func errorsCompareByCode() {
        let a = HCIError.truncated("one field")
        let b = HCIError.truncated("another field")
        #expect(a == b)
        #expect(a != HCIError.invalidParameter("x"))
        let failed = HCIError.commandFailed(.reset, status: .hardwareFailure)
        #expect(failed.status == .hardwareFailure)
        #expect(failed.statusForController == .hardwareFailure)
        #expect(failed.description.contains("Hardware Failure"))
    }
}
