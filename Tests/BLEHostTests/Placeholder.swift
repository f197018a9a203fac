import Testing

@Test func BLEHostTestsBuilds() {}
