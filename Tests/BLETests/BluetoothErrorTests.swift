import BLE
import Testing

/// `BluetoothError` as a user compares and prints it: by code, like `CBError` and `CBATTError`, with the
/// controller's status kept beside the code and the words saying what happened.
@Suite struct BluetoothErrorTests {
    @Test func equalityIsByCodeAndAnATTRefusalsCodeIncludesItsATTCode() {
        #expect(BluetoothError(.timeout, "one") == BluetoothError(.timeout, "two"))
        #expect(BluetoothError(.timeout, "x") != BluetoothError(.transactionTimeout, "x"))
        #expect(BluetoothError(.att(.readNotPermitted), "a") == BluetoothError(.att(.readNotPermitted), "b"))
        #expect(BluetoothError(.att(.readNotPermitted), "a") != BluetoothError(.att(.writeNotPermitted), "a"))
        #expect(BluetoothError(.att(.readNotPermitted), "a").attErrorCode == .readNotPermitted)
        #expect(BluetoothError(.unknown, "a").attErrorCode == nil)
        // The status is diagnostics too: two link losses compare equal whatever their reason.
        #expect(
            BluetoothError(.peripheralDisconnected, "a", hciStatus: .remoteUserTerminatedConnection)
                == BluetoothError(.peripheralDisconnected, "b", hciStatus: .remoteDeviceTerminatedConnectionPowerOff))
    }

    @Test func theDescriptionIsTheWordsWithTheStatusAndTheDebugDescriptionSaysWhere() {
        let plain = BluetoothError(.notConnected, "the peripheral is not connected")
        #expect(plain.description == "the peripheral is not connected")
        #expect(plain.hciStatus == nil)
        let refused = BluetoothError(.unknown, "LE Create Connection was refused", hciStatus: .commandDisallowed)
        #expect(refused.description == "LE Create Connection was refused (HCI status \(HCIStatus.commandDisallowed))")
        #expect(refused.message == "LE Create Connection was refused")
        #expect(refused.debugDescription.hasPrefix("BluetoothError.unknown: LE Create Connection was refused"))
        #expect(refused.debugDescription.contains("BluetoothErrorTests.swift:"))
    }

    @Test func aSwitchOverCodesReadsAsItDoesWithCBError() {
        func kind(_ error: BluetoothError) -> String {
            switch error.code {
            case .connectionTimeout, .transactionTimeout, .controllerTimeout, .timeout: return "timeout"
            case .peripheralDisconnected: return "gone"
            case .att(.insufficientAuthentication): return "pair first"
            default: return error.attErrorCode.map { "att \($0)" } ?? "other"
            }
        }
        #expect(kind(BluetoothError(.controllerTimeout, "")) == "timeout")
        #expect(kind(BluetoothError(.att(.insufficientAuthentication), "")) == "pair first")
        #expect(kind(BluetoothError(.att(.readNotPermitted), "")) == "att \(ATTErrorCode.readNotPermitted)")
        #expect(kind(BluetoothError(.uuidNotAllowed, "")) == "other")
    }
}
