// SPDX-License-Identifier: MIT
pragma solidity ^0.8.26;

// Tokens of the devnet's rug-check scenario: one per verdict the published
// rules (docs/rules.md) must give. For the devnet only.

/// @notice Minimal Ownable.
abstract contract Owned {
    address public owner;

    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    constructor() {
        owner = msg.sender;
        emit OwnershipTransferred(address(0), msg.sender);
    }

    modifier onlyOwner() {
        require(msg.sender == owner, "Ownable: caller is not the owner");
        _;
    }

    function renounceOwnership() external onlyOwner {
        emit OwnershipTransferred(owner, address(0));
        owner = address(0);
    }

    function transferOwnership(address newOwner) external onlyOwner {
        emit OwnershipTransferred(owner, newOwner);
        owner = newOwner;
    }
}

/// @notice A plain ERC-20 with 18 decimals; variants override _beforeTransfer.
contract BaseToken is Owned {
    string public name;
    string public symbol;
    uint8 public constant decimals = 18;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    constructor(string memory name_, string memory symbol_, uint256 supply) {
        name = name_;
        symbol = symbol_;
        _mint(msg.sender, supply);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        _transfer(msg.sender, to, value);
        return true;
    }

    function approve(address spender, uint256 value) external returns (bool) {
        allowance[msg.sender][spender] = value;
        emit Approval(msg.sender, spender, value);
        return true;
    }

    function transferFrom(address from, address to, uint256 value) external returns (bool) {
        require(allowance[from][msg.sender] >= value, "ERC20: insufficient allowance");
        allowance[from][msg.sender] -= value;
        _transfer(from, to, value);
        return true;
    }

    function _mint(address to, uint256 value) internal {
        totalSupply += value;
        balanceOf[to] += value;
        emit Transfer(address(0), to, value);
    }

    function _transfer(address from, address to, uint256 value) internal virtual {
        require(balanceOf[from] >= value, "ERC20: transfer amount exceeds balance");
        balanceOf[from] -= value;
        balanceOf[to] += value;
        emit Transfer(from, to, value);
    }
}

/// @notice PASS: no privileged function, ownership renounced at deployment.
contract CleanToken is BaseToken {
    constructor() BaseToken("Clean Token", "CLEAN", 1_000_000e18) {}
}

/// @notice FAIL: the owner can mint.
contract MintableToken is BaseToken {
    constructor() BaseToken("Mintable Token", "MINT", 1_000_000e18) {}

    function mint(address to, uint256 value) external onlyOwner {
        _mint(to, value);
    }
}

/// @notice FAIL: the owner can block addresses; blockBots(address[]) has the
/// selector 0x00b8cf2a, which solc pushes with PUSH3.
contract BlacklistToken is BaseToken {
    mapping(address => bool) public isBlacklisted;

    constructor() BaseToken("Blacklist Token", "BLOCK", 1_000_000e18) {}

    function blacklist(address who) external onlyOwner {
        isBlacklisted[who] = true;
    }

    function blockBots(address[] calldata bots) external onlyOwner {
        for (uint256 i = 0; i < bots.length; i++) isBlacklisted[bots[i]] = true;
    }

    function unblockBot(address who) external onlyOwner {
        isBlacklisted[who] = false;
    }

    function _transfer(address from, address to, uint256 value) internal override {
        require(!isBlacklisted[from] && !isBlacklisted[to], "blacklisted");
        super._transfer(from, to, value);
    }
}

/// @notice WARN: the owner can pause transfers.
contract PausableToken is BaseToken {
    bool public paused;

    constructor() BaseToken("Pausable Token", "PAUSE", 1_000_000e18) {}

    function pause() external onlyOwner {
        paused = true;
    }

    function unpause() external onlyOwner {
        paused = false;
    }

    function _transfer(address from, address to, uint256 value) internal override {
        require(!paused, "paused");
        super._transfer(from, to, value);
    }
}

/// @notice FAIL: fee on transfer, with fee setters the owner controls.
contract FeeToken is BaseToken {
    uint256 public buyFee = 2;
    uint256 public sellFee = 2;
    address public feeWallet;

    constructor() BaseToken("Fee Token", "TAX", 1_000_000e18) {
        feeWallet = msg.sender;
    }

    function setFees(uint256 buy, uint256 sell) external onlyOwner {
        buyFee = buy;
        sellFee = sell;
    }

    function setTaxFeePercent(uint256 fee) external onlyOwner {
        sellFee = fee;
    }

    function _transfer(address from, address to, uint256 value) internal override {
        uint256 fee = (value * sellFee) / 100;
        super._transfer(from, feeWallet, fee);
        super._transfer(from, to, value - fee);
    }
}

/// @notice PASS as data: name() and symbol() return bytes32 (old style).
contract Bytes32Token {
    bytes32 public constant name = "Bytes32 Token";
    bytes32 public constant symbol = "B32";
    uint8 public constant decimals = 18;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;

    event Transfer(address indexed from, address indexed to, uint256 value);

    constructor() {
        totalSupply = 1_000_000e18;
        balanceOf[msg.sender] = totalSupply;
        emit Transfer(address(0), msg.sender, totalSupply);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        require(balanceOf[msg.sender] >= value, "balance");
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
        return true;
    }
}

/// @notice Implementation behind the proxy and the clone: a token that is
/// initialized instead of constructed.
contract InitializableToken {
    string public name;
    string public symbol;
    uint8 public constant decimals = 18;
    uint256 public totalSupply;
    address public owner;
    bool private initialized;
    mapping(address => uint256) public balanceOf;

    event Transfer(address indexed from, address indexed to, uint256 value);

    function initialize(string calldata name_, string calldata symbol_, uint256 supply, address holder, address owner_) external {
        require(!initialized, "initialized");
        initialized = true;
        name = name_;
        symbol = symbol_;
        owner = owner_;
        totalSupply = supply;
        balanceOf[holder] = supply;
        emit Transfer(address(0), holder, supply);
    }

    function transfer(address to, uint256 value) external returns (bool) {
        require(balanceOf[msg.sender] >= value, "balance");
        balanceOf[msg.sender] -= value;
        balanceOf[to] += value;
        emit Transfer(msg.sender, to, value);
        return true;
    }
}

/// @notice FAIL: an EIP-1967 upgradeable proxy whose admin can replace the code.
contract UpgradeableProxy {
    bytes32 private constant IMPLEMENTATION_SLOT = 0x360894a13ba1a3210667c828492db98dca3e2076cc3735a920a3ca505d382bbc;
    bytes32 private constant ADMIN_SLOT = 0xb53127684a568b3173ae13b9f8a6016e243e63b6e8ee1178d6a717850b5d6103;

    event Upgraded(address indexed implementation);

    constructor(address implementation, bytes memory init) {
        assembly {
            sstore(IMPLEMENTATION_SLOT, implementation)
            sstore(ADMIN_SLOT, caller())
        }
        emit Upgraded(implementation);
        (bool ok, ) = implementation.delegatecall(init);
        require(ok, "init");
    }

    function upgradeTo(address implementation) external {
        address admin;
        assembly {
            admin := sload(ADMIN_SLOT)
        }
        require(msg.sender == admin, "not admin");
        assembly {
            sstore(IMPLEMENTATION_SLOT, implementation)
        }
        emit Upgraded(implementation);
    }

    fallback() external payable {
        assembly {
            let impl := sload(IMPLEMENTATION_SLOT)
            calldatacopy(0, 0, calldatasize())
            let ok := delegatecall(gas(), impl, 0, calldatasize(), 0, 0)
            returndatacopy(0, 0, returndatasize())
            switch ok
            case 0 { revert(0, returndatasize()) }
            default { return(0, returndatasize()) }
        }
    }
}

/// @notice Deploys EIP-1167 clones of an implementation.
contract CloneFactory {
    event Cloned(address clone);

    function clone(address implementation, bytes calldata init) external returns (address instance) {
        bytes20 target = bytes20(implementation);
        assembly {
            let code := mload(0x40)
            mstore(code, 0x3d602d80600a3d3981f3363d3d373d3d3d363d73000000000000000000000000)
            mstore(add(code, 0x14), target)
            mstore(add(code, 0x28), 0x5af43d82803e903d91602b57fd5bf30000000000000000000000000000000000)
            instance := create(0, code, 0x37)
        }
        require(instance != address(0), "clone");
        (bool ok, ) = instance.call(init);
        require(ok, "init");
        emit Cloned(instance);
    }
}

/// @notice FAIL: the owner sets the largest transfer, with no floor: a
/// limit of 0 freezes every holder.
contract LimitToken is BaseToken {
    uint256 public maxTxAmount;

    constructor() BaseToken("Limit Token", "LIMIT", 1_000_000e18) {
        maxTxAmount = totalSupply;
    }

    function setMaxTxAmount(uint256 amount) external onlyOwner {
        maxTxAmount = amount;
    }

    function _transfer(address from, address to, uint256 value) internal override {
        require(from == owner || value <= maxTxAmount, "max tx");
        super._transfer(from, to, value);
    }
}

/// @notice WARN: the same limit with a floor of 0.1 % of the supply, which
/// the owner cannot go below: holders are slowed, never frozen.
contract FloorLimitToken is BaseToken {
    uint256 public maxTxAmount;

    constructor() BaseToken("Floor Limit Token", "FLOOR", 1_000_000e18) {
        maxTxAmount = totalSupply;
    }

    function setMaxTxAmount(uint256 amount) external onlyOwner {
        require(amount >= totalSupply / 1000, "below the floor");
        maxTxAmount = amount;
    }

    function _transfer(address from, address to, uint256 value) internal override {
        require(from == owner || value <= maxTxAmount, "max tx");
        super._transfer(from, to, value);
    }
}
