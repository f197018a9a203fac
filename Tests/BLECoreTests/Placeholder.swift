import Testing

@Test func BLECoreTestsBuilds() {}
