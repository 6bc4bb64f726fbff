module github.com/sessionlane/lanes/bench

go 1.26

require (
	github.com/marusama/semaphore/v2 v2.5.0
	github.com/moby/locker v1.0.1
	github.com/puzpuzpuz/xsync/v4 v4.5.0
	github.com/sessionlane/lanes v0.0.0
	go.uber.org/goleak v1.3.0
	golang.org/x/sync v0.19.0
	gonum.org/v1/plot v0.17.0
	k8s.io/utils v0.0.0-20261023123148-ca04ba58ecab
)

require (
	codeberg.org/go-fonts/liberation v0.5.0 // indirect
	codeberg.org/go-latex/latex v0.2.0 // indirect
	codeberg.org/go-pdf/fpdf v0.11.1 // indirect
	git.sr.ht/~sbinet/gg v0.7.0 // indirect
	github.com/ajstarks/svgo v0.0.0-20211024235047-1546f124cd8b // indirect
	github.com/golang/freetype v0.0.0-20170609003504-e2365dfdc4a0 // indirect
	golang.org/x/image v0.36.0 // indirect
	golang.org/x/text v0.34.0 // indirect
	golang.org/x/time v0.14.0 // indirect
)

replace github.com/sessionlane/lanes => ../
