module github.com/zaris-go/zaris

go 1.26
