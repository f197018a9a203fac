import BLECore
import BLESystem
import Foundation

extension AdvertisementData {
    /// The meaning of an advertisement and its scan response.
    ///
    /// Malformed data (a structure overrunning the payload) contributes the structures before the fault; a
    /// scanner shows what it can rather than dropping the device.
    init(decodingAdvertisement adv: [UInt8], scanResponse: [UInt8]?, connectable: Bool) {
        self.init(
            decoded: AdvertisingData(
                AdvertisingData(leniently: adv).structures + AdvertisingData(leniently: scanResponse ?? []).structures),
            connectable: connectable)
    }

    /// The advertisement `data` (an advertisement and its scan response, decoded) carries.
    init(decoded data: AdvertisingData, connectable: Bool) {
        self.init()
        localName = data.localName
        let services = data.serviceUUIDs
        serviceUUIDs = services.isEmpty ? nil : services
        if let m = data.manufacturerData { manufacturerData = Data(m.bytes) }
        let sd = data.serviceData
        serviceData = sd.isEmpty ? nil : sd.mapValues { Data($0) }
        txPowerLevel = data.txPowerLevel.map { Int($0) }
        let solicited = data.solicitedServiceUUIDs
        solicitedServiceUUIDs = solicited.isEmpty ? nil : solicited
        isConnectable = connectable
    }

    /// What the system advertises for this data (it encodes it, and builds the background form).
    var content: AdvertisingContent {
        AdvertisingContent(
            localName: localName, serviceUUIDs: serviceUUIDs ?? [], solicitedServiceUUIDs: solicitedServiceUUIDs ?? [],
            txPowerLevel: txPowerLevel, manufacturerData: manufacturerData.map { Array($0) },
            serviceData: (serviceData ?? [:]).mapValues { Array($0) }, isConnectable: isConnectable)
    }
}
