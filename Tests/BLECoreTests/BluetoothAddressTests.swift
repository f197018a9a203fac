import BLECore
import NIOCore
import Testing

@Suite struct BluetoothAddressTests {
    @Test func parsesAndPrints() throws {
        let address = try #require(BluetoothAddress(string: "c0:11:22:33:44:5f", type: .randomDevice))
        #expect(address.bytes == [0xC0, 0x11, 0x22, 0x33, 0x44, 0x5F])
        #expect(address.string == "C0:11:22:33:44:5F")
        #expect(address.description == "C0:11:22:33:44:5F (random)")
        #expect(BluetoothAddress(string: "C0-11-22-33-44-5F", type: .randomDevice) == address)
        #expect(BluetoothAddress(string: "00:00:00:00:00:00") == .zero)
    }

    @Test(arguments: [
        "", "C0:11:22:33:44", "C0:11:22:33:44:5F:66", "C0:11:22:33:44:5G", "C0:1:22:33:44:5F",
        "C0::11:22:33:44:5F", "C0:11:22:33:44:", ":C0:11:22:33:44", "+0:11:22:33:44:5F", "C011:22:33:44:5F:00",
    ])
    func rejects(text: String) {
        #expect(BluetoothAddress(string: text) == nil)
    }

    @Test func littleEndianOnTheWire() throws {
        let address = try #require(BluetoothAddress(string: "C0:11:22:33:44:5F", type: .randomDevice))
        #expect(address.littleEndianBytes == [0x5F, 0x44, 0x33, 0x22, 0x11, 0xC0])
        #expect(BluetoothAddress(littleEndian: [0x5F, 0x44, 0x33, 0x22, 0x11, 0xC0], type: .randomDevice) == address)
        #expect(BluetoothAddress(littleEndian: [0x5F, 0x44, 0x33, 0x22, 0x11], type: .randomDevice) == nil)

        var buffer = ByteBuffer()
        buffer.writeAddress(address)
        #expect(Array(buffer.readableBytesView) == [0x5F, 0x44, 0x33, 0x22, 0x11, 0xC0])
        #expect(buffer.readAddress(type: .randomDevice) == address)
        #expect(buffer.readableBytes == 0)

        var short = ByteBuffer(bytes: [1, 2, 3, 4, 5])
        #expect(short.readAddress(type: .publicDevice) == nil)
        #expect(short.readableBytes == 5)
    }

    @Test func typeTakesPartInEquality() {
        let bytes: [UInt8] = [0xC0, 0x11, 0x22, 0x33, 0x44, 0x5F]
        #expect(
            BluetoothAddress(bytes: bytes, type: .publicDevice) != BluetoothAddress(bytes: bytes, type: .randomDevice))
    }

    @Test(arguments: [
        (
            "C0:11:22:33:44:5F", BluetoothAddress.AddressType.randomDevice,
            BluetoothAddress.RandomKind?.some(.staticAddress)
        ),
        ("FF:FF:FF:FF:FF:FF", .randomDevice, .staticAddress),
        ("40:11:22:33:44:5F", .randomDevice, .resolvablePrivate),
        ("7F:11:22:33:44:5F", .randomIdentity, .resolvablePrivate),
        ("00:11:22:33:44:5F", .randomDevice, .nonResolvablePrivate),
        ("3F:11:22:33:44:5F", .randomDevice, .nonResolvablePrivate),
        ("80:11:22:33:44:5F", .randomDevice, nil),  // 0b10: reserved
        ("C0:11:22:33:44:5F", .publicDevice, nil),  // public addresses have no random kind
        ("C0:11:22:33:44:5F", .publicIdentity, nil),
    ])
    func randomKinds(text: String, type: BluetoothAddress.AddressType, kind: BluetoothAddress.RandomKind?) throws {
        let address = try #require(BluetoothAddress(string: text, type: type))
        #expect(address.randomKind == kind)
    }

    @Test func addressTypes() {
        #expect(!BluetoothAddress.AddressType.publicDevice.isRandom)
        #expect(BluetoothAddress.AddressType.randomDevice.isRandom)
        #expect(!BluetoothAddress.AddressType.publicIdentity.isRandom)
        #expect(BluetoothAddress.AddressType.randomIdentity.isRandom)
        #expect(BluetoothAddress.AddressType(rawValue: 0xFF).description == "0xff")
        #expect(BluetoothAddress.AddressType.publicIdentity.description == "public-identity")
    }
}
