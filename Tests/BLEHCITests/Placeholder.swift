import Testing

@Test func BLEHCITestsBuilds() {}
