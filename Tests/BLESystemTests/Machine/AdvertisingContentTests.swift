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

    @Test func aNonConnectableAdvertisementIsScannableOnlyWithAScanResponse() {
        let beacon = AdvertisingContent(manufacturerData: [0x4C, 0x00, 0x02], isConnectable: false)
        #expect(beacon.request.parameters.kind == .nonConnectable)
        let named = AdvertisingContent(localName: String(repeating: "n", count: 28), isConnectable: false)
        #expect(!named.request.scanResponse.isEmpty, "the complete name goes into the scan response")
        #expect(named.request.parameters.kind == .scannable)
    }
}
