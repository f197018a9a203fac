import BLE
import Synchronization
import Testing

// A text transfer written the way CoreBluetooth apps are (in the manner of Apple's "Transferring Data Between
// Bluetooth Low Energy Devices"): option and advertisement dictionaries, the NSNumber RSSI, delegate methods
// only, notifications chunked to `maximumUpdateValueLength` and ended by "EOM", write-backs chunked to
// `maximumWriteValueLength(for: .withoutResponse)` and paced by `canSendWriteWithoutResponse`, and a reconnect
// loop through `retrieveConnectedPeripherals(withServices:)` and scanning. Only the `CB` prefix differs from
// CoreBluetooth code, and the UUID type's name (`BluetoothUUID` for `CBUUID`).

private enum TransferService {
    static let serviceUUID = BluetoothUUID(string: "3F2C9A10-5B7E-4D1A-9C3E-8A6B2D4F1E70")!
    static let characteristicUUID = BluetoothUUID(string: "3F2C9A11-5B7E-4D1A-9C3E-8A6B2D4F1E70")!
}

/// The sending side. `@unchecked Sendable`: its fields are touched on its delegate queue only.
private final class TransferPeripheral: NSObject, PeripheralManagerDelegate, @unchecked Sendable {
    var peripheralManager: PeripheralManager!
    var transferCharacteristic: MutableCharacteristic?
    var connectedCentral: Central?
    var dataToSend = Data()
    var sendDataIndex = 0
    var sendingEOM = false
    let received = Mutex<[Data]>([])

    init(text: String, system: BluetoothSystem, queue: DispatchQueue) {
        super.init()
        dataToSend = Data(text.utf8)
        peripheralManager = PeripheralManager(
            delegate: self, queue: queue, options: [PeripheralManagerOptionShowPowerAlertKey: true], system: system)
    }

    func peripheralManagerDidUpdateState(_ peripheral: PeripheralManager) {
        guard peripheral.state == .poweredOn else { return }
        let characteristic = MutableCharacteristic(
            type: TransferService.characteristicUUID, properties: [.notify, .writeWithoutResponse], value: nil,
            permissions: [.readable, .writeable])
        let service = MutableService(type: TransferService.serviceUUID, primary: true)
        service.characteristics = [characteristic]
        peripheralManager.add(service)
        transferCharacteristic = characteristic
        peripheralManager.startAdvertising([AdvertisementDataServiceUUIDsKey: [TransferService.serviceUUID]])
    }

    func peripheralManager(
        _ peripheral: PeripheralManager, central: Central, didSubscribeTo characteristic: Characteristic
    ) {
        connectedCentral = central
        sendDataIndex = 0
        sendingEOM = false
        sendData()
    }

    func peripheralManagerIsReady(toUpdateSubscribers peripheral: PeripheralManager) {
        sendData()
    }

    func sendData() {
        guard let transferCharacteristic, let connectedCentral else { return }
        if sendingEOM {
            if peripheralManager.updateValue(Data("EOM".utf8), for: transferCharacteristic, onSubscribedCentrals: nil) {
                sendingEOM = false
            }
            return
        }
        while sendDataIndex < dataToSend.count {
            let amount = min(dataToSend.count - sendDataIndex, connectedCentral.maximumUpdateValueLength)
            let chunk = dataToSend.subdata(in: sendDataIndex..<sendDataIndex + amount)
            guard peripheralManager.updateValue(chunk, for: transferCharacteristic, onSubscribedCentrals: nil) else {
                return
            }
            sendDataIndex += amount
            if sendDataIndex >= dataToSend.count {
                sendingEOM = true
                if peripheralManager.updateValue(
                    Data("EOM".utf8), for: transferCharacteristic, onSubscribedCentrals: nil)
                {
                    sendingEOM = false
                }
                return
            }
        }
    }

    func peripheralManager(_ peripheral: PeripheralManager, didReceiveWrite requests: [ATTRequest]) {
        for request in requests {
            if let value = request.value { received.withLock { $0.append(value) } }
        }
    }
}

/// The receiving side. `@unchecked Sendable`: its fields are touched on its delegate queue only.
private final class TransferCentral: NSObject, CentralManagerDelegate, PeripheralDelegate, @unchecked Sendable {
    var centralManager: CentralManager!
    var discoveredPeripheral: Peripheral?
    var transferCharacteristic: Characteristic?
    var data = Data()
    var writeIterationsComplete = 0
    var connectionIterationsComplete = 0
    let defaultIterations: Int
    let texts = Mutex<[String]>([])
    let refusedWhileUnauthorized = Mutex(false)

    init(system: BluetoothSystem, queue: DispatchQueue, iterations: Int) {
        defaultIterations = iterations
        super.init()
        centralManager = CentralManager(
            delegate: self, queue: queue, options: [CentralManagerOptionShowPowerAlertKey: true], system: system)
    }

    func centralManagerDidUpdateState(_ central: CentralManager) {
        switch central.state {
        case .poweredOn: retrievePeripheral()
        case .unauthorized:
            switch central.authorization {
            case .denied, .restricted: refusedWhileUnauthorized.withLock { $0 = true }
            default: break
            }
        default: break
        }
    }

    func retrievePeripheral() {
        let connected = centralManager.retrieveConnectedPeripherals(withServices: [TransferService.serviceUUID])
        if let peripheral = connected.last {
            discoveredPeripheral = peripheral
            centralManager.connect(peripheral, options: nil)
        } else {
            centralManager.scanForPeripherals(
                withServices: [TransferService.serviceUUID], options: [CentralManagerScanOptionAllowDuplicatesKey: true]
            )
        }
    }

    // swift-format-ignore: AlwaysUseLowerCamelCase
    func centralManager(
        _ central: CentralManager, didDiscover peripheral: Peripheral, advertisementData: [String: Any],
        rssi RSSI: NSNumber
    ) {
        guard RSSI.intValue >= -70 else { return }
        guard
            (advertisementData[AdvertisementDataServiceUUIDsKey] as? [BluetoothUUID])?.contains(
                TransferService.serviceUUID) == true
        else { return }
        if discoveredPeripheral != peripheral {
            discoveredPeripheral = peripheral
            centralManager.connect(peripheral, options: nil)
        }
    }

    func centralManager(_ central: CentralManager, didFailToConnect peripheral: Peripheral, error: (any Error)?) {
        discoveredPeripheral = nil
        retrievePeripheral()
    }

    func centralManager(_ central: CentralManager, didConnect peripheral: Peripheral) {
        centralManager.stopScan()
        connectionIterationsComplete += 1
        writeIterationsComplete = 0
        data.removeAll(keepingCapacity: false)
        peripheral.delegate = self
        peripheral.discoverServices([TransferService.serviceUUID])
    }

    func centralManager(
        _ central: CentralManager, didDisconnectPeripheral peripheral: Peripheral, error: (any Error)?
    ) {
        discoveredPeripheral = nil
        if connectionIterationsComplete < defaultIterations { retrievePeripheral() }
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverServices error: (any Error)?) {
        guard error == nil else { return cleanup() }
        for service in peripheral.services ?? [] {
            peripheral.discoverCharacteristics([TransferService.characteristicUUID], for: service)
        }
    }

    func peripheral(_ peripheral: Peripheral, didDiscoverCharacteristicsFor service: Service, error: (any Error)?) {
        guard error == nil else { return cleanup() }
        for characteristic in service.characteristics ?? []
        where characteristic.uuid == TransferService.characteristicUUID {
            transferCharacteristic = characteristic
            peripheral.setNotifyValue(true, for: characteristic)
        }
    }

    func peripheral(_ peripheral: Peripheral, didUpdateValueFor characteristic: Characteristic, error: (any Error)?) {
        guard error == nil, let chunk = characteristic.value else { return cleanup() }
        if String(data: chunk, encoding: .utf8) == "EOM" {
            texts.withLock { $0.append(String(decoding: data, as: UTF8.self)) }
            writeData()
        } else {
            data.append(chunk)
        }
    }

    func peripheralIsReady(toSendWriteWithoutResponse peripheral: Peripheral) {
        writeData()
    }

    /// Writes the received text back, one write of `maximumWriteValueLength` at a time, while there is room.
    func writeData() {
        guard let discoveredPeripheral, let transferCharacteristic else { return }
        while writeIterationsComplete < defaultIterations && discoveredPeripheral.canSendWriteWithoutResponse {
            let mtu = discoveredPeripheral.maximumWriteValueLength(for: .withoutResponse)
            let packet = data.prefix(mtu)
            discoveredPeripheral.writeValue(packet, for: transferCharacteristic, type: .withoutResponse)
            writeIterationsComplete += 1
        }
        if writeIterationsComplete == defaultIterations {
            discoveredPeripheral.setNotifyValue(false, for: transferCharacteristic)
        }
    }

    func peripheral(
        _ peripheral: Peripheral, didUpdateNotificationStateFor characteristic: Characteristic, error: (any Error)?
    ) {
        if !characteristic.isNotifying { cleanup() }
    }

    func cleanup() {
        guard let discoveredPeripheral, discoveredPeripheral.state != .disconnected else { return }
        centralManager.cancelPeripheralConnection(discoveredPeripheral)
    }
}

@Suite struct PortedTransferTests {
    @Test func theTextArrivesWholeAndEveryWriteBackArrivesOnEachOfThreeConnections() async throws {
        let radio = SimulatedRadio(seed: 21)
        let phone = BluetoothSystem.simulated(on: radio, name: "phone")
        let tablet = BluetoothSystem.simulated(on: radio, name: "tablet", position: RadioPosition(x: 1, y: 0))
        let text = (0..<60).map { "line \($0): the quick brown fox jumps over the lazy dog." }.joined(separator: "\n")
        let sender = TransferPeripheral(text: text, system: tablet, queue: DispatchQueue(label: "tablet"))
        let receiver = TransferCentral(system: phone, queue: DispatchQueue(label: "phone"), iterations: 3)
        try await radio.run(for: .seconds(30))

        #expect(receiver.texts.withLock { $0 } == [text, text, text])
        let writes = sender.received.withLock { $0 }
        #expect(writes.count == 9)
        #expect(writes.allSatisfy { $0 == Data(text.utf8).prefix(512) })
        #expect(!receiver.refusedWhileUnauthorized.withLock { $0 })
    }

    @Test func aDeniedAppSeesUnauthorizedAndDoesNotScan() async throws {
        let radio = SimulatedRadio(seed: 22)
        let phone = BluetoothSystem.simulated(on: radio, name: "phone")
        phone.authorization = .denied
        let receiver = TransferCentral(system: phone, queue: DispatchQueue(label: "phone"), iterations: 1)
        try await radio.run(for: .seconds(1))
        #expect(receiver.refusedWhileUnauthorized.withLock { $0 })
        #expect(!receiver.centralManager.isScanning)
    }
}
