// SPDX-License-Identifier: MIT
pragma solidity ^0.8.26;

// The fixed-trap catalogue: ERC-20 tokens traded on a genuine Uniswap V2
// pair against WETH whose _transfer holds a trap no one can lift any more
// (a constant, a value written only at deployment, a guard no key passes,
// an owner who renounced), each beside a control of the same shape that
// does not bite now. Tests deploy them from traps.json (compile.js) on the
// devnet and measure through the genuine router what a buyer faces.
//
// Every token mints its 1,000,000,000 tokens (18 decimals) to the
// deployer and, as launch tokens do, creates its own pair in its
// constructor from the router it is given (SafeMoon's
// `IUniswapV2Factory(router.factory()).createPair(address(this),
// router.WETH())`), so the pair is an immutable the trap compares with: a
// transfer to the pair is a sale, one from it a buy. Most exempt the
// deployer (and the token itself) in a mapping written only in the
// constructor, the way `_isExcludedFromFee[owner()] = true` does, which is
// what lets the deployer seed the pool through addLiquidityETH. Fees go to
// the token's own balance. For tests only.

interface IUniswapV2Factory {
    function createPair(address tokenA, address tokenB) external returns (address pair);
}

interface IUniswapV2Router02 {
    function factory() external pure returns (address);
    function WETH() external pure returns (address);
}

// TrapToken is the plain ERC-20 every trap but the reflection token
// builds on: balances, allowances, Transfer and Approval, every move
// through the virtual _transfer each token overrides.
abstract contract TrapToken {
    string public name;
    string public symbol;
    uint8 public constant decimals = 18;
    uint256 public totalSupply;
    mapping(address => uint256) public balanceOf;
    mapping(address => mapping(address => uint256)) public allowance;
    // isExempt holds the deployer and the token, written only here.
    mapping(address => bool) public isExempt;
    address public immutable pair;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    constructor(string memory name_, string memory symbol_, address router) {
        name = name_;
        symbol = symbol_;
        pair = IUniswapV2Factory(IUniswapV2Router02(router).factory()).createPair(address(this), IUniswapV2Router02(router).WETH());
        isExempt[msg.sender] = true;
        isExempt[address(this)] = true;
        totalSupply = 1_000_000_000 ether;
        balanceOf[msg.sender] = totalSupply;
        emit Transfer(address(0), msg.sender, totalSupply);
    }

    function approve(address spender, uint256 amount) external returns (bool) {
        allowance[msg.sender][spender] = amount;
        emit Approval(msg.sender, spender, amount);
        return true;
    }

    function transfer(address to, uint256 amount) external returns (bool) {
        _transfer(msg.sender, to, amount);
        return true;
    }

    function transferFrom(address from, address to, uint256 amount) external returns (bool) {
        uint256 allowed = allowance[from][msg.sender];
        if (allowed != type(uint256).max) {
            require(allowed >= amount, "ERC20: insufficient allowance");
            allowance[from][msg.sender] = allowed - amount;
        }
        _transfer(from, to, amount);
        return true;
    }

    function _transfer(address from, address to, uint256 amount) internal virtual {
        require(from != address(0) && to != address(0), "ERC20: transfer from or to the zero address");
        uint256 balance = balanceOf[from];
        require(balance >= amount, "ERC20: transfer amount exceeds balance");
        unchecked {
            balanceOf[from] = balance - amount;
        }
        balanceOf[to] += amount;
        emit Transfer(from, to, amount);
    }

    // _takeFee moves bps / 10,000 of amount from `from` to the token and
    // returns what is left to deliver.
    function _takeFee(address from, uint256 amount, uint256 bps) internal returns (uint256) {
        uint256 fee = amount * bps / 10_000;
        if (fee > 0) TrapToken._transfer(from, address(this), fee);
        return amount - fee;
    }
}

// Owned is Ownable's owner(), onlyOwner and renounceOwnership().
abstract contract Owned {
    address private _owner;

    event OwnershipTransferred(address indexed previousOwner, address indexed newOwner);

    constructor() {
        _owner = msg.sender;
        emit OwnershipTransferred(address(0), msg.sender);
    }

    modifier onlyOwner() {
        require(_owner == msg.sender, "Ownable: caller is not the owner");
        _;
    }

    function owner() public view returns (address) {
        return _owner;
    }

    function renounceOwnership() external onlyOwner {
        emit OwnershipTransferred(_owner, address(0));
        _owner = address(0);
    }
}

// ConstantSellFee99 (trap): 99 % of every sale goes to the token, a
// constant no function changes. A seller gets 1 % of what he sells into
// the pool.
contract ConstantSellFee99 is TrapToken {
    uint256 private constant SELL_FEE = 9_900; // basis points

    constructor(address router) TrapToken("Sell Fee 99", "FEE99", router) {}

    function _transfer(address from, address to, uint256 amount) internal override {
        if (to == pair && !isExempt[from]) amount = _takeFee(from, amount, SELL_FEE);
        super._transfer(from, to, amount);
    }
}

// ConstantSellFee3 (control): ConstantSellFee99's shape with a 3 % fee, an
// ordinary launch tax.
contract ConstantSellFee3 is TrapToken {
    uint256 private constant SELL_FEE = 300; // basis points

    constructor(address router) TrapToken("Sell Fee 3", "FEE3", router) {}

    function _transfer(address from, address to, uint256 amount) internal override {
        if (to == pair && !isExempt[from]) amount = _takeFee(from, amount, SELL_FEE);
        super._transfer(from, to, amount);
    }
}

// SellAllowList (trap): only the addresses listed at deployment (and the
// deployer) may sell; the list has no writer after the constructor.
// Everyone else can buy and never sell.
contract SellAllowList is TrapToken {
    mapping(address => bool) public canSell;

    constructor(address router, address[] memory allowed) TrapToken("Allow List", "ALLOW", router) {
        canSell[msg.sender] = true;
        for (uint256 i = 0; i < allowed.length; i++) canSell[allowed[i]] = true;
    }

    function _transfer(address from, address to, uint256 amount) internal override {
        if (to == pair) require(canSell[from], "ERC20: sender may not sell");
        super._transfer(from, to, amount);
    }
}

// SellAllowListExpiring (control when allowListEnds has passed; a trap
// until then): SellAllowList whose list binds only before allowListEnds,
// a timestamp written only in the constructor, as an anti-sniper launch
// window does.
contract SellAllowListExpiring is TrapToken {
    mapping(address => bool) public canSell;
    uint256 public allowListEnds;

    constructor(address router, address[] memory allowed, uint256 ends) TrapToken("Allow List Expiring", "ALLOWX", router) {
        canSell[msg.sender] = true;
        for (uint256 i = 0; i < allowed.length; i++) canSell[allowed[i]] = true;
        allowListEnds = ends;
    }

    function _transfer(address from, address to, uint256 amount) internal override {
        if (to == pair && block.timestamp < allowListEnds) require(canSell[from], "ERC20: sender may not sell");
        super._transfer(from, to, amount);
    }
}

// MaxSell caps a sale at maxSellAmount, written only in the constructor
// (no setter).
abstract contract MaxSell is TrapToken {
    uint256 public maxSellAmount;

    function _transfer(address from, address to, uint256 amount) internal override {
        if (to == pair && !isExempt[from]) require(amount <= maxSellAmount, "Sell transfer amount exceeds the maxSellAmount.");
        super._transfer(from, to, amount);
    }
}

// MaxSellOneToken (trap): a sale of more than one token (1e18 units)
// reverts, for good: a buyer can only sell crumbs.
contract MaxSellOneToken is MaxSell {
    constructor(address router) TrapToken("Max Sell One", "MAX1", router) {
        maxSellAmount = 1 ether;
    }
}

// MaxSellOnePercent (control): MaxSell's code with a cap of 1 % of the
// supply (10,000,000 tokens), a whale limit no ordinary sale reaches.
contract MaxSellOnePercent is MaxSell {
    constructor(address router) TrapToken("Max Sell 1%", "MAXP", router) {
        maxSellAmount = totalSupply / 100;
    }
}

// TradingSwitch blocks every transfer that does not touch an exempt
// address (the deployer's seeding does) until tradingOpen; only the
// constant OPENER can open it, and nothing closes it.
abstract contract TradingSwitch is TrapToken {
    address private constant OPENER = 0x000000000000000000000000000000000000dEaD;
    bool public tradingOpen;

    function openTrading() external {
        require(msg.sender == OPENER, "Ownable: caller is not the owner");
        tradingOpen = true;
    }

    function _transfer(address from, address to, uint256 amount) internal override {
        if (!isExempt[from] && !isExempt[to]) require(tradingOpen, "Trading is not active.");
        super._transfer(from, to, amount);
    }
}

// TradingClosedDeadOpener (trap): the switch is closed and only 0x…dEaD,
// which no one holds the key of, can open it: buys and sells revert.
contract TradingClosedDeadOpener is TradingSwitch {
    constructor(address router) TrapToken("Closed Trading", "CLOSED", router) {}
}

// TradingOpenedForGood (control): TradingSwitch's code, opened at
// deployment; no function closes it.
contract TradingOpenedForGood is TradingSwitch {
    constructor(address router) TrapToken("Open Trading", "OPEN", router) {
        tradingOpen = true;
    }
}

// SellLock30Days (trap): a buyer cannot sell until 30 days after his last
// buy (lastBuy, written on every transfer from the pair).
contract SellLock30Days is TrapToken {
    uint256 private constant SELL_LOCK = 30 days;
    mapping(address => uint256) public lastBuy;

    constructor(address router) TrapToken("Sell Lock 30d", "LOCK30D", router) {}

    function _transfer(address from, address to, uint256 amount) internal override {
        if (from == pair) lastBuy[to] = block.timestamp;
        if (to == pair) require(block.timestamp >= lastBuy[from] + SELL_LOCK, "Sell locked after buy.");
        super._transfer(from, to, amount);
    }
}

// SellLock20Seconds (control): SellLock30Days's shape with a 20 s lock, an
// anti-bot cooldown that has passed by the time a buyer sells.
contract SellLock20Seconds is TrapToken {
    uint256 private constant SELL_LOCK = 20 seconds;
    mapping(address => uint256) public lastBuy;

    constructor(address router) TrapToken("Sell Lock 20s", "LOCK20S", router) {}

    function _transfer(address from, address to, uint256 amount) internal override {
        if (from == pair) lastBuy[to] = block.timestamp;
        if (to == pair) require(block.timestamp >= lastBuy[from] + SELL_LOCK, "Sell locked after buy.");
        super._transfer(from, to, amount);
    }
}

// OriginSellGate (trap): a sale goes through only if the transaction
// comes from the deployer (an immutable compared with tx.origin), so only
// the deployer can sell, through any router; anyone else's sale reverts
// with a message that blames his balance.
contract OriginSellGate is TrapToken {
    address private immutable _origin;

    constructor(address router) TrapToken("Origin Gate", "ORIGIN", router) {
        _origin = msg.sender;
    }

    function _transfer(address from, address to, uint256 amount) internal override {
        if (to == pair) require(tx.origin == _origin, "ERC20: transfer amount exceeds balance");
        super._transfer(from, to, amount);
    }
}

// Pause blocks every transfer while paused, except the owner's own; the
// owner pauses and unpauses.
abstract contract Pause is TrapToken, Owned {
    bool public paused;

    function pause() external onlyOwner {
        paused = true;
    }

    function unpause() external onlyOwner {
        paused = false;
    }

    function _transfer(address from, address to, uint256 amount) internal override {
        if (paused) require(from == owner() || to == owner(), "Pausable: paused");
        super._transfer(from, to, amount);
    }
}

// PausedToken (trap once the owner renounced, after seeding the pool):
// paused at deployment, and no one is left to unpause: buys and sells
// revert.
contract PausedToken is Pause {
    constructor(address router) TrapToken("Paused", "PAUSED", router) {
        paused = true;
    }
}

// UnpausedToken (control once the owner renounced): Pause's code, not
// paused, and no one is left to pause it.
contract UnpausedToken is Pause {
    constructor(address router) TrapToken("Unpaused", "UNPAUSED", router) {}
}

// FixedTaxes charges buyTax on buys and sellTax on sales (basis points),
// immutables: no one can change them.
abstract contract FixedTaxes is TrapToken {
    uint256 public immutable buyTax;
    uint256 public immutable sellTax;

    constructor(uint256 buyBps, uint256 sellBps) {
        buyTax = buyBps;
        sellTax = sellBps;
    }

    function _transfer(address from, address to, uint256 amount) internal override {
        if (from == pair && !isExempt[to]) amount = _takeFee(from, amount, buyTax);
        else if (to == pair && !isExempt[from]) amount = _takeFee(from, amount, sellTax);
        super._transfer(from, to, amount);
    }
}

// BuyTax5 (known tax): 5 % on buys, none on sales.
contract BuyTax5 is FixedTaxes {
    constructor(address router) TrapToken("Buy Tax 5", "BUY5", router) FixedTaxes(500, 0) {}
}

// SellTax7 (known tax): 7 % on sales, none on buys.
contract SellTax7 is FixedTaxes {
    constructor(address router) TrapToken("Sell Tax 7", "SELL7", router) FixedTaxes(0, 700) {}
}

// BuyTax2SellTax8 (known tax): 2 % on buys, 8 % on sales.
contract BuyTax2SellTax8 is FixedTaxes {
    constructor(address router) TrapToken("Tax 2/8", "TAX28", router) FixedTaxes(200, 800) {}
}

// OwnerTaxes (known tax while the owner leaves it; a trap if he raises it
// and renounces): buyTax and sellTax in basis points, set by the owner
// with setTaxes, uncapped as scam tokens leave them (above 10,000 a taxed
// transfer reverts).
contract OwnerTaxes is TrapToken, Owned {
    uint256 public buyTax;
    uint256 public sellTax;

    constructor(address router, uint256 buyBps, uint256 sellBps) TrapToken("Owner Taxes", "OTAX", router) {
        buyTax = buyBps;
        sellTax = sellBps;
    }

    function setTaxes(uint256 buyBps, uint256 sellBps) external onlyOwner {
        buyTax = buyBps;
        sellTax = sellBps;
    }

    function _transfer(address from, address to, uint256 amount) internal override {
        if (from == pair && !isExempt[to]) amount = _takeFee(from, amount, buyTax);
        else if (to == pair && !isExempt[from]) amount = _takeFee(from, amount, sellTax);
        super._transfer(from, to, amount);
    }
}

// WhitelistHoneypot (trap once the owner renounced): the public "only
// whitelisted can sell" honeypot template. Buys go through; a sale by
// anyone but the owner and the addresses whitelisted at deployment
// reverts with a message that blames a transaction limit. Renouncing
// removes the owner's own exception and changes nothing else.
contract WhitelistHoneypot is TrapToken, Owned {
    mapping(address => bool) private _whiteList;

    constructor(address router, address[] memory whitelist) TrapToken("Honey", "HONEY", router) {
        for (uint256 i = 0; i < whitelist.length; i++) _whiteList[whitelist[i]] = true;
    }

    function _transfer(address from, address to, uint256 amount) internal override {
        if (from != owner() && to != owner() && to == pair) {
            require(_whiteList[from], "Transfer amount exceeds the maxTxAmount.");
        }
        super._transfer(from, to, amount);
    }
}

// ReflectionToken is SafeMoon's shape, kept small (no swapAndLiquify, no
// max transaction): balances in reflected units (_rOwned) except for the
// accounts excluded from reward (_tOwned); every transfer between
// accounts not excluded from fee pays _taxFee % reflected to all holders
// and _liquidityFee % to the token; the owner sets each fee (uncapped: if
// they sum above 100 a taxed transfer reverts) and the fee exclusions;
// the pair, created in the constructor, is an immutable.
//
//   - Trap: ReflectionToken(router, 0, 99) (or the owner setting
//     setLiquidityFeePercent(99) and setTaxFeePercent(0) after seeding),
//     then renounceOwnership(): 99 % of every buy and sale, for good.
//   - Control: ReflectionToken(router, 5, 5), then renounceOwnership():
//     SafeMoon's 5 % + 5 %.
contract ReflectionToken is Owned {
    string public constant name = "Reflection";
    string public constant symbol = "RFI";
    uint8 public constant decimals = 18;

    mapping(address => uint256) private _rOwned;
    mapping(address => uint256) private _tOwned;
    mapping(address => mapping(address => uint256)) private _allowances;
    mapping(address => bool) private _isExcludedFromFee;
    mapping(address => bool) private _isExcluded;
    address[] private _excluded;

    uint256 private constant MAX = ~uint256(0);
    uint256 private constant _tTotal = 1_000_000_000 ether;
    uint256 private _rTotal = (MAX - (MAX % _tTotal));
    uint256 private _tFeeTotal;

    uint256 public _taxFee;
    uint256 public _liquidityFee;

    address public immutable uniswapV2Router;
    address public immutable uniswapV2Pair;

    event Transfer(address indexed from, address indexed to, uint256 value);
    event Approval(address indexed owner, address indexed spender, uint256 value);

    constructor(address router, uint256 taxFee, uint256 liquidityFee) {
        _rOwned[msg.sender] = _rTotal;
        uniswapV2Pair = IUniswapV2Factory(IUniswapV2Router02(router).factory()).createPair(address(this), IUniswapV2Router02(router).WETH());
        uniswapV2Router = router;
        _taxFee = taxFee;
        _liquidityFee = liquidityFee;
        _isExcludedFromFee[msg.sender] = true;
        _isExcludedFromFee[address(this)] = true;
        emit Transfer(address(0), msg.sender, _tTotal);
    }

    function totalSupply() external pure returns (uint256) {
        return _tTotal;
    }

    function balanceOf(address account) public view returns (uint256) {
        if (_isExcluded[account]) return _tOwned[account];
        return tokenFromReflection(_rOwned[account]);
    }

    function allowance(address owner_, address spender) external view returns (uint256) {
        return _allowances[owner_][spender];
    }

    function approve(address spender, uint256 amount) external returns (bool) {
        _approve(msg.sender, spender, amount);
        return true;
    }

    function transfer(address to, uint256 amount) external returns (bool) {
        _transfer(msg.sender, to, amount);
        return true;
    }

    function transferFrom(address from, address to, uint256 amount) external returns (bool) {
        _transfer(from, to, amount);
        _approve(from, msg.sender, _allowances[from][msg.sender] - amount);
        return true;
    }

    function totalFees() external view returns (uint256) {
        return _tFeeTotal;
    }

    function tokenFromReflection(uint256 rAmount) public view returns (uint256) {
        require(rAmount <= _rTotal, "Amount must be less than total reflections");
        return rAmount / _getRate();
    }

    function excludeFromReward(address account) external onlyOwner {
        require(!_isExcluded[account], "Account is already excluded");
        if (_rOwned[account] > 0) _tOwned[account] = tokenFromReflection(_rOwned[account]);
        _isExcluded[account] = true;
        _excluded.push(account);
    }

    function excludeFromFee(address account) external onlyOwner {
        _isExcludedFromFee[account] = true;
    }

    function includeInFee(address account) external onlyOwner {
        _isExcludedFromFee[account] = false;
    }

    function isExcludedFromFee(address account) external view returns (bool) {
        return _isExcludedFromFee[account];
    }

    function setTaxFeePercent(uint256 taxFee) external onlyOwner {
        _taxFee = taxFee;
    }

    function setLiquidityFeePercent(uint256 liquidityFee) external onlyOwner {
        _liquidityFee = liquidityFee;
    }

    function _approve(address owner_, address spender, uint256 amount) private {
        require(owner_ != address(0) && spender != address(0), "ERC20: approve from or to the zero address");
        _allowances[owner_][spender] = amount;
        emit Approval(owner_, spender, amount);
    }

    // _getRate is reflected units per token over the accounts that take
    // reflections.
    function _getRate() private view returns (uint256) {
        uint256 rSupply = _rTotal;
        uint256 tSupply = _tTotal;
        for (uint256 i = 0; i < _excluded.length; i++) {
            if (_rOwned[_excluded[i]] > rSupply || _tOwned[_excluded[i]] > tSupply) return _rTotal / _tTotal;
            rSupply -= _rOwned[_excluded[i]];
            tSupply -= _tOwned[_excluded[i]];
        }
        if (rSupply < _rTotal / _tTotal) return _rTotal / _tTotal;
        return rSupply / tSupply;
    }

    function _transfer(address from, address to, uint256 amount) private {
        require(from != address(0) && to != address(0), "ERC20: transfer from or to the zero address");
        require(amount > 0, "Transfer amount must be greater than zero");
        bool takeFee = !_isExcludedFromFee[from] && !_isExcludedFromFee[to];
        uint256 tFee = takeFee ? amount * _taxFee / 100 : 0;
        uint256 tLiquidity = takeFee ? amount * _liquidityFee / 100 : 0;
        uint256 tTransferAmount = amount - tFee - tLiquidity;
        uint256 rate = _getRate();
        _rOwned[from] -= amount * rate;
        if (_isExcluded[from]) _tOwned[from] -= amount;
        _rOwned[to] += tTransferAmount * rate;
        if (_isExcluded[to]) _tOwned[to] += tTransferAmount;
        _rOwned[address(this)] += tLiquidity * rate;
        if (_isExcluded[address(this)]) _tOwned[address(this)] += tLiquidity;
        _rTotal -= tFee * rate;
        _tFeeTotal += tFee;
        emit Transfer(from, to, tTransferAmount);
    }
}
