import Testing

@Test func BLEGATTTestsBuilds() {}
