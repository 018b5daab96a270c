package policy

// PyPIHosts allows `pip install` from the Python Package Index and nothing else.
var PyPIHosts = []string{"pypi.org", "files.pythonhosted.org", "*.pythonhosted.org"}

// CloudMetadataDeny lists the cloud instance-metadata endpoints and the
// link-local ranges they live in. hermetic always denies all of them, in
// every posture; the list is exported for deny lists handed to other tools
// and for documentation. The policy does not read this variable, so changing
// it cannot weaken hermetic.
var CloudMetadataDeny = []string{
	"169.254.169.254",
	"169.254.170.2",
	"metadata.google.internal",
	"metadata",
	"100.100.100.200",
	"168.63.129.16",
	"fd00:ec2::/32",
	"fe80::a9fe:a9fe",
	"169.254.0.0/16",
	"fe80::/10",
}
