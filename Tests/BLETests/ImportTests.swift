import BLE
import Testing

/// `import BLE` alone gives what `import CoreBluetooth` gives: Data, UUID and DispatchQueue come along.
@Suite struct ImportTests {
    @Test func dataUUIDAndDispatchQueueNeedNoOtherImport() {
        let value = Data([0x01, 0x02])
        let identifier = UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")
        let queue = DispatchQueue(label: "ble.import-test")
        let central = CentralManager(delegate: nil, queue: queue, options: nil)
        #expect(value.count == 2)
        #expect(identifier != nil)
        #expect(central.retrievePeripherals(withIdentifiers: [identifier!]).isEmpty)
    }
}
