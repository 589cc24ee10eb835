module appnorth.example/walkthrough

go 1.19
