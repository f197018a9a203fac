import Testing

@Test func BLETransportPosixTestsBuilds() {}
