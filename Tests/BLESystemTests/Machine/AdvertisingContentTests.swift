import BLECore
import BLEHost
import Testing

@testable import BLESystem

/// The two forms the system builds of an app's advertisement (`AdvertisingContent`): as asked, and the
/// background form of an app out of the foreground with `bluetooth-peripheral` (IOSRules.md 2.3–2.5, 2.7).
@Suite struct AdvertisingContentTests {
    static let heartRate = BluetoothUUID(UInt16(0x180D))
    static let content = AdvertisingContent(
        localName: "Pulse", serviceUUIDs: [heartRate], manufacturerData: [0x59, 0x00, 0x01])

    @Test func theFormAskedForCarriesTheNameTheServicesAndTheRest() {
        let request = Self.content.request
        let data = AdvertisingData(leniently: request.data + request.scanResponse)
        #expect(data.localName == "Pulse")
        #expect(data.serviceUUIDs == [Self.heartRate])
        #expect(data.manufacturerData?.bytes == [0x59, 0x00, 0x01])
        #expect(request.parameters == AdvertisingParameters(), "connectable, at the default interval")
    }

    @Test func theBackgroundFormHasNoNameAndItsServicesInTheOverflowAreaEveryInterval() {
        let request = Self.content.backgroundRequest(interval: .milliseconds(200))
        let data = AdvertisingData(leniently: request.data + request.scanResponse)
        #expect(data.localName == nil)
        #expect(data.serviceUUIDs.isEmpty)
        // The overflow area takes the manufacturer data's place; a scan for the service finds its bit.
        #expect(AppleOverflowArea.listed([Self.heartRate], in: data) == [Self.heartRate])
        #expect(request.parameters.intervalMin == 320 && request.parameters.intervalMax == 320, "200 ms in 0.625 ms")
    }

    /// Every field set: the bytes on the air, pinned (flags, the services and the shortened name first; the
    /// complete name, then what does not fit, in the scan response).
    @Test func everyFieldGoesWhereItFits() {
        let full = AdvertisingContent(
            localName: "Pulse Oximeter", serviceUUIDs: [Self.heartRate, BluetoothUUID(UInt16(0x180F))],
            solicitedServiceUUIDs: [BluetoothUUID(UInt16(0x1812))], txPowerLevel: -8,
            manufacturerData: [0x59, 0x00, 0xAA, 0xBB], serviceData: [BluetoothUUID(UInt16(0x180F)): [0x64]],
            isConnectable: true)
        let request = full.request
        // Flags; the complete 16-bit list (0x180D, 0x180F); the complete name (it fits); TX power -8 dBm.
        #expect(
            request.data.hexString == "020106" + "05030d180f18" + "0f09" + "50756c7365204f78696d65746572" + "020af8")
        // Manufacturer data, service data of 0x180F, solicited 0x1812: in the scan response, in that order.
        #expect(request.scanResponse.hexString == "05ff5900aabb" + "04160f1864" + "03141218")
        #expect(request.parameters == AdvertisingParameters())
        // Without services, the background form keeps the manufacturer data (there is no overflow area to make).
        let beacon = AdvertisingContent(localName: "B", manufacturerData: [0x59, 0x00, 0x01])
        let background = AdvertisingData(leniently: beacon.backgroundRequest(interval: .milliseconds(200)).data)
        #expect(background.manufacturerData?.bytes == [0x59, 0x00, 0x01])
        #expect(background.localName == nil)
    }

    @Test func aNonConnectableAdvertisementIsScannableOnlyWithAScanResponse() {
        let beacon = AdvertisingContent(manufacturerData: [0x4C, 0x00, 0x02], isConnectable: false)
        #expect(beacon.request.parameters.kind == .nonConnectable)
        let named = AdvertisingContent(localName: String(repeating: "n", count: 28), isConnectable: false)
        #expect(!named.request.scanResponse.isEmpty, "the complete name goes into the scan response")
        #expect(named.request.parameters.kind == .scannable)
    }
}
