module pytestconcurrency/native

go 1.21
