import Testing

@Test func BLETestsBuilds() {}
