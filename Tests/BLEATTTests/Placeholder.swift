import Testing

@Test func BLEATTTestsBuilds() {}
